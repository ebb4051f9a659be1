"""Which TensorFlow image the integration tests build the trainer on (tests/support/common.py): a
clone with Docker Hub needs no offline base (#37)."""
from __future__ import annotations

from support.common import HUB_BASE, OFFLINE_BASE, pick_base_image


def test_the_offline_base_when_here_else_docker_hubs_unless_one_is_named():
    here, absent = (lambda name: True), (lambda name: False)
    assert pick_base_image({}, here) == OFFLINE_BASE == "tf-offline-base:cpu"
    assert pick_base_image({}, absent) == HUB_BASE == "tensorflow/tensorflow:latest"
    assert pick_base_image({"BASE_IMAGE": "tensorflow/tensorflow:2.21.0"}, here) == "tensorflow/tensorflow:2.21.0"
    assert pick_base_image({"BASE_IMAGE": "a:1", "TFC_TEST_BASE_IMAGE": "b:2"}, absent) == "b:2"
    assert pick_base_image({"TFC_TEST_BASE_IMAGE": " "}, absent) == HUB_BASE
