#!/usr/bin/env bash
# Download, on this machine, the wheels the trainer needs on top of BASE_IMAGE into docker/wheels/,
# so that `docker build` needs no network inside the build.
#   usage: docker/fetch-wheels.sh BASE_IMAGE
# When the base image is not present locally, leaves docker/wheels/ empty: the build then
# installs from PyPI (the usual case on a machine that can pull the base).
set -euo pipefail
base=${1:?usage: fetch-wheels.sh BASE_IMAGE}
out="$(cd "$(dirname "$0")" && pwd)/wheels"
# Every `tfcompose up` in ship mode builds the image, so a repeat must cost nothing: the wheels
# are reused while the base image (by ID) and this script are unchanged (delete $stamp to refetch).
stamp="$out.stamp"
base_id=$(docker image inspect --format '{{.Id}}' "$base" 2>/dev/null) || base_id=""
want="$base_id $(sha256sum "$0" | cut -d' ' -f1)"
if [ -n "$base_id" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && ls "$out"/*.whl >/dev/null 2>&1; then
  echo "fetch-wheels: $(ls "$out"/*.whl | wc -l) wheels for $base already in $out" >&2
  exit 0
fi
rm -rf "$out" "$stamp"; mkdir -p "$out"
touch "$out/.keep"
if [ -z "$base_id" ]; then
  echo "fetch-wheels: $base is not present locally; the build will install from PyPI" >&2
  exit 0
fi
read -r pyver arch tfminor < <(docker run --rm --entrypoint python3 "$base" -c '
import importlib.metadata as m, platform, sys
for d in ("tensorflow", "tensorflow-cpu", "tf-nightly"):
    try: v = m.version(d); break
    except m.PackageNotFoundError: pass
print(f"{sys.version_info[0]}{sys.version_info[1]}", platform.machine(), ".".join(v.split(".")[:2]))')
echo "fetch-wheels: $base has Python ${pyver:0:1}.${pyver:1}, $arch, TensorFlow $tfminor" >&2
platforms=(--platform "manylinux2014_$arch" --platform "manylinux_2_17_$arch"
           --platform "manylinux_2_27_$arch" --platform "manylinux_2_28_$arch")
download() {
  python3 -m pip download -q -d "$out" --only-binary=:all: --python-version "$pyver" --implementation cp \
    "${platforms[@]}" "$@" 2>&1 | grep -v "is ignored" >&2 || true
}
download "pyyaml>=6" "pydantic>=2.6" "tensorboard~=$tfminor.0"
download --no-deps "tf_keras~=$tfminor.0"   # its one dependency, TensorFlow, is the base itself
# The model search's study (Optuna) and what it needs that TensorFlow's base does not bring
# (numpy, packaging and typing-extensions come with TensorFlow).
download --no-deps "optuna==5.0.0" "alembic==1.20.1" "sqlalchemy==2.1.9" "mako==1.4.3" "markupsafe==3.0.4" \
  "colorlog==6.12.0" "tqdm==4.70.1"
# MLflow's client, with which the chief writes the best model in MLflow's format when the inventory
# has `tracking:` (trainer/train/mlflow_model.py); pandas because MLflow's TensorFlow flavour imports it.
# With their dependencies: the build installs them with no network.
download "mlflow-skinny==3.17.2" "pandas==2.3.3"
ls "$out"/*.whl >/dev/null 2>&1 || { echo "fetch-wheels: no wheel downloaded" >&2; exit 1; }
echo "$want" > "$stamp"
echo "fetch-wheels: $(ls "$out"/*.whl | wc -l) wheels in $out" >&2
