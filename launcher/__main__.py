"""`python -m launcher ARGS` is `tfcompose ARGS`: for a process that has the venv's Python but not
its scripts on PATH (the tests, the benches and the docs' scripts start the CLI so)."""
from launcher.cli import run

if __name__ == "__main__":
    run()
