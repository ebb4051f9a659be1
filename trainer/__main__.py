import os
import sys

from trainer import quiet

# TensorFlow's start-up noise (absl's preamble, CUDA probes on a host without a GPU) is filtered out
# of stderr by a parent that runs the trainer as its child (trainer/quiet.py), unless asked for.
if quiet.wanted(sys.argv[1:], os.environ):
    sys.exit(quiet.run_filtered([sys.executable, "-m", "trainer", *sys.argv[1:]], os.environ))

# Before TensorFlow is imported anywhere: route tf.keras to tf_keras, whose model.fit works
# under MultiWorkerMirroredStrategy (Keras 3's does not on TF 2.21: keras-team/keras#20585).
os.environ["TF_USE_LEGACY_KERAS"] = "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from trainer.main import main  # noqa: E402

sys.exit(main())
