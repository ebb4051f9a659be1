"""A language-server client as an editor is one: the real `yaml-language-server` (Red Hat's, from
the npm registry, kept in the tests' cache) started on standard input and output, spoken to in LSP's
JSON-RPC with its Content-Length frames.

    server = yaml_language_server()          # installs it into the cache once per machine
    with LanguageClient(server, root) as lsp:
        lsp.open(path, text)                 # the server validates it and publishes diagnostics
        lsp.diagnostics(uri)                 # what an editor would underline
        lsp.completion(uri, line, character) # what it would offer there
"""
from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path

from support.bare import TREE_CACHE

# Pinned: a test of what editors do should not change because the registry did.
YAML_LANGUAGE_SERVER = "yaml-language-server@1.15.0"
INSTALL_DIR = TREE_CACHE / "npm" / YAML_LANGUAGE_SERVER.replace("@", "-")
CA_FILE = "/etc/ssl/certs/ca-certificates.crt"    # the package index is behind a TLS-intercepting proxy


def yaml_language_server() -> Path | None:
    """The server's executable, installed with npm into the cache the first time; None without npm."""
    binary = INSTALL_DIR / "node_modules" / ".bin" / "yaml-language-server"
    if binary.exists():
        return binary
    if not (shutil.which("npm") and shutil.which("node")):
        return None
    partial = INSTALL_DIR.with_name(INSTALL_DIR.name + f".partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    env = {**os.environ, "NODE_EXTRA_CA_CERTS": CA_FILE} if Path(CA_FILE).exists() else None
    subprocess.run(["npm", "install", "--prefix", str(partial), "--no-audit", "--no-fund", "--loglevel=error",
                    YAML_LANGUAGE_SERVER], check=True, capture_output=True, timeout=300, env=env)
    partial.replace(INSTALL_DIR)    # whole or not at all: a killed install leaves only a .partial folder
    return binary


class LanguageClient:
    def __init__(self, server: Path, root: Path):
        self.server, self.root = server, root
        self.incoming: queue.Queue = queue.Queue()
        self.published: dict[str, list] = {}
        self.next_id = 0

    def __enter__(self) -> "LanguageClient":
        self.proc = subprocess.Popen([str(self.server), "--stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        threading.Thread(target=self._read, daemon=True).start()
        self.request("initialize", {"processId": os.getpid(), "rootUri": self.root.as_uri(),
                                    "capabilities": {"textDocument": {"completion": {"completionItem": {
                                        "documentationFormat": ["markdown", "plaintext"]}}}}})
        self.notify("initialized", {})
        # What VS Code's YAML extension sends: validation, hover and completion on.
        self.notify("workspace/didChangeConfiguration", {"settings": {"yaml": {
            "validate": True, "hover": True, "completion": True, "schemaStore": {"enable": False}}}})
        return self

    def __exit__(self, *exc) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)

    def open(self, path: Path, text: str) -> str:
        uri = path.as_uri()
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "yaml", "version": 1,
                                                              "text": text}})
        return uri

    def diagnostics(self, uri: str, timeout: float = 30.0) -> list[dict]:
        """The diagnostics the server published for the document, once it has published them."""
        deadline = time.monotonic() + timeout
        while uri not in self.published:
            self._pump(deadline)
        return self.published[uri]

    def completion(self, uri: str, line: int, character: int) -> list[dict]:
        answer = self.request("textDocument/completion", {"textDocument": {"uri": uri},
                                                          "position": {"line": line, "character": character}})
        return answer["items"] if isinstance(answer, dict) else (answer or [])

    def hover(self, uri: str, line: int, character: int) -> str:
        answer = self.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                     "position": {"line": line, "character": character}})
        return (answer or {}).get("contents", {}).get("value", "")

    def request(self, method: str, params: dict, timeout: float = 30.0):
        self.next_id += 1
        asked = self.next_id
        self._send({"jsonrpc": "2.0", "id": asked, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            message = self._pump(deadline)
            if message.get("id") == asked and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result")

    def notify(self, method: str, params: dict) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def _pump(self, deadline: float) -> dict:
        """The next message from the server, answering its own requests as an editor would."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("yaml-language-server did not answer in time")
        message = self.incoming.get(timeout=left)
        if message.get("method") == "textDocument/publishDiagnostics":
            self.published[message["params"]["uri"]] = message["params"]["diagnostics"]
        elif "method" in message and "id" in message:    # workspace/configuration, client/registerCapability
            result = [{"validate": True, "hover": True, "completion": True}] * len(
                message["params"].get("items", [])) if message["method"] == "workspace/configuration" else None
            self._send({"jsonrpc": "2.0", "id": message["id"], "result": result})
        return message

    def _send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            headers = {}
            while (line := out.readline().strip()):
                name, _, value = line.decode().partition(":")
                headers[name.lower()] = value.strip()
            if not headers:
                return    # the server ended
            self.incoming.put(json.loads(out.read(int(headers["content-length"]))))
