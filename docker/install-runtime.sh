#!/bin/sh
# Install what the trainer needs on top of a TensorFlow base image.
#   usage: install-runtime.sh WHEEL_DIR
# Uses only WHEEL_DIR when it holds wheels (offline build), PyPI otherwise.
set -eu
wheels=$1
py=python3

tf_version=$($py - <<'PY'
import importlib.metadata as m
for dist in ("tensorflow", "tensorflow-cpu", "tf-nightly"):
    try:
        print(m.version(dist)); break
    except m.PackageNotFoundError:
        pass
PY
)
[ -n "$tf_version" ] || { echo "install-runtime: no TensorFlow in the base image" >&2; exit 1; }
minor=$(echo "$tf_version" | cut -d. -f1,2)

need=""
$py -c "import yaml" 2>/dev/null || need="$need pyyaml>=6"
$py -c "import pydantic, sys; sys.exit(int(pydantic.VERSION.split('.')[0]) < 2)" 2>/dev/null || need="$need pydantic>=2.6"
$py -c "import tensorboard" 2>/dev/null || need="$need tensorboard~=$minor.0"
$py -c "import tf_keras" 2>/dev/null || need="$need tf_keras~=$minor.0"
$py -c "import optuna" 2>/dev/null || need="$need optuna==5.0.0"
$py -c "import mlflow, pandas" 2>/dev/null || need="$need mlflow-skinny==3.17.2 pandas==2.3.3"
echo "install-runtime: TensorFlow $tf_version; installing:${need:- nothing}"
[ -n "$need" ] || exit 0

if ls "$wheels"/*.whl >/dev/null 2>&1; then
  # shellcheck disable=SC2086
  $py -m pip install --no-cache-dir --no-index --find-links "$wheels" $need
else
  # A CA bundle given as the build secret pip_ca (compose: PIP_CA_FILE) for a TLS-intercepting proxy.
  if [ -s /run/secrets/pip_ca ]; then export PIP_CERT=/run/secrets/pip_ca; fi
  # shellcheck disable=SC2086
  $py -m pip install --no-cache-dir $need
fi
