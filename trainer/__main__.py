import os
import sys

# Before TensorFlow is imported anywhere: route tf.keras to tf_keras, whose model.fit works
# under MultiWorkerMirroredStrategy (Keras 3's does not on TF 2.21: keras-team/keras#20585).
os.environ["TF_USE_LEGACY_KERAS"] = "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from trainer.main import main  # noqa: E402

sys.exit(main())
