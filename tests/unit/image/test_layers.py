"""Layer-delta archives without Docker: the split of a docker-save stream, the chain rules, and the
archive a host receives (the real engine is exercised in tests/integration)."""
from __future__ import annotations

import gzip
import io
import json
import tarfile
import pytest
from hypothesis import given, strategies as st
from launcher.image import layers
from support.builders import BLOBS, chunks_of, digest, docker_save
from launcher.errors import ImageError


def test_split_then_assemble_gives_a_tar_with_manifest_config_and_only_the_missing_layers(tmp_path):
    saved, image_id = docker_save(BLOBS)
    parts = layers.split_save("t:1", image_id, chunks_of(saved), tmp_path)
    assert parts.diff_ids == [digest(b) for b in BLOBS]
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(b"".join(parts.chunks([2]))))) as tar:
        names = tar.getnames()
        manifest = json.load(tar.extractfile("manifest.json"))
        assert tar.extractfile(f"{parts.diff_ids[2][7:]}/layer.tar").read() == b"code v1"
        assert digest(tar.extractfile(manifest[0]["Config"]).read()) == image_id
    assert manifest[0]["RepoTags"] == ["t:1"] and len(manifest[0]["Layers"]) == 3
    assert len(names) == 3  # config, manifest, the one missing layer: the others stay behind


def test_a_second_image_sharing_layers_reuses_their_cached_members(tmp_path):
    saved, image_id = docker_save(BLOBS)
    layers.split_save("t:1", image_id, chunks_of(saved), tmp_path)
    members = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "layers").glob("*.gz")}
    saved2, image_id2 = docker_save(BLOBS[:2] + [b"code v2"])
    parts2 = layers.split_save("t:1", image_id2, chunks_of(saved2), tmp_path)
    after = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "layers").glob("*.gz")}
    assert len(after) == 4 and all(after[name] == mtime for name, mtime in members.items())
    assert layers.load_parts("t:1", image_id2, tmp_path) == parts2  # no second docker save needed


def test_a_save_whose_config_is_not_the_image_is_refused(tmp_path):
    saved, _ = docker_save(BLOBS)
    with pytest.raises(ImageError, match="not image"):
        layers.split_save("t:1", "sha256:" + "0" * 64, chunks_of(saved), tmp_path)


def test_a_save_with_compressed_layers_cannot_be_split(tmp_path):
    saved, image_id = docker_save(BLOBS)
    broken = saved.replace(b"code v1", b"code v2")  # the layer no longer hashes to its diff ID
    with pytest.raises(ImageError, match="no plain tar"):
        layers.split_save("t:1", image_id, chunks_of(broken), tmp_path)


diff_lists = st.lists(st.sampled_from([digest(bytes([i])) for i in range(6)]), min_size=1, max_size=6)


@given(image=diff_lists, held=st.lists(diff_lists, max_size=4))
def test_missing_layers_are_a_suffix_and_exactly_those_whose_chain_the_engine_lacks(image, held):
    present = layers.present_chains(held)
    missing = layers.missing_layers(image, present)
    assert missing == list(range(len(image) - len(missing), len(image)))
    chains = layers.chain_ids(image)
    assert all(chains[i] in present for i in range(len(image)) if i not in missing)
    assert not missing or chains[missing[0]] not in present


def test_a_layer_held_under_another_parent_is_still_sent():
    a, b, c = (digest(bytes([i])) for i in range(3))
    assert layers.missing_layers([a, c], layers.present_chains([[b, c]])) == [0, 1]
    assert layers.missing_layers([a, c], layers.present_chains([[a, b], [a, c, b]])) == []


@pytest.mark.parametrize("damage", [
    lambda cache, image_id, parts: (parts.layer_dir / f"{parts.diff_ids[1][7:]}.size").write_text("garbage"),
    lambda cache, image_id, parts: _meta(cache, image_id, config="7b7d"),                        # another config
    lambda cache, image_id, parts: _meta(cache, image_id, diff_ids=["sha256:../../../../etc/passwd"]),
    lambda cache, image_id, parts: (cache / "images" / f"{image_id[7:]}.json").write_text("{not json"),
])
def test_a_damaged_cache_entry_is_a_miss_and_the_image_is_split_again(tmp_path, damage):
    saved, image_id = docker_save(BLOBS)
    cache = tmp_path / "cache"
    parts = layers.split_save("t:1", image_id, chunks_of(saved), cache)
    damage(cache, image_id, parts)
    assert layers.load_parts("t:1", image_id, cache) is None
    again = layers.split_save("t:1", image_id, chunks_of(saved), cache)
    assert layers.load_parts("t:1", image_id, cache) == again and again.layer_size(1) == len(BLOBS[1])


def _meta(cache, image_id, **changes):
    path = cache / "images" / f"{image_id[7:]}.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def test_splitting_tells_how_far_compressing_the_new_layers_is_and_skips_cached_ones(tmp_path):
    saved, image_id = docker_save(BLOBS)
    seen = []
    layers.split_save("t:1", image_id, chunks_of(saved), tmp_path, lambda done, total: seen.append((done, total)))
    total = sum(len(b) for b in BLOBS)
    assert seen[-1] == (total, total) and all(t == total for _, t in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and len(seen) >= 3      # rising, layer by layer
    saved2, image_id2 = docker_save(BLOBS[:2] + [b"code v2"])
    again = []
    layers.split_save("t:1", image_id2, chunks_of(saved2), tmp_path, lambda done, total: again.append((done, total)))
    assert again[-1] == (len(b"code v2"), len(b"code v2"))    # only the one new layer is compressed


def test_an_image_whose_layers_are_all_cached_has_nothing_to_compress_and_says_nothing(tmp_path):
    saved, image_id = docker_save(BLOBS)
    layers.split_save("t:1", image_id, chunks_of(saved), tmp_path)
    saved2, image_id2 = docker_save(BLOBS, tag="t:2")       # the same layers under another tag
    seen = []
    layers.split_save("t:2", image_id2, chunks_of(saved2), tmp_path, lambda done, total: seen.append((done, total)))
    assert seen == []
