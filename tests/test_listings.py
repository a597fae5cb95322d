"""transforms/storage/listings.py against the emulator, through the fault proxy (which counts
every request): the identities of a folder's wanted objects from its listing, the same a stat
of each gives, in a page rather than a request each; folders holding few of them, and listings
that keep failing or are refused, left to stats; a refresh in a bucket on both runners. How far
a listing pages is tested with a client that pages as Cloud Storage does: the emulator ignores
page sizes and start offsets."""

import json
import urllib.parse
from pathlib import Path

import pytest
from conftest import arguments, make_images, manifest_row, write_manifest
from scripted_server import response

from tfrecord_pipeline.runners.convert import run
from tfrecord_pipeline.transforms.plan.fingerprints import row_fingerprint, row_fingerprints
from tfrecord_pipeline.transforms.storage import fileio, listings


def _folders(tmp_path: Path, gcs, sizes: dict[str, int]) -> str:
    """Small objects `<folder>/<i>.jpg` (i zero-padded) in the bucket, `sizes` of each; the
    gs:// folder they are under."""
    root = tmp_path / "src"
    for folder, count in sizes.items():
        (root / folder).mkdir(parents=True)
        for index in range(count):
            (root / folder / f"{index:03d}.jpg").write_bytes(f"{folder} {index}".encode())
    return gcs(root, f"listings-{tmp_path.name}")


def _uris(source: str, folder: str, indices) -> list[str]:
    return [f"{source}/{folder}/{index:03d}.jpg" for index in indices]


def _listings(proxy) -> int:
    return sum(proxy.listings.values())


def test_a_folder_holding_enough_wanted_objects_is_listed_once_not_statted_object_by_object(
    tmp_path, gcs, faulty_gcs
):
    source = _folders(tmp_path, gcs, {"many": 40, "few": 40})
    many, few = _uris(source, "many", range(5, 35)), _uris(source, "few", range(3))
    proxy = faulty_gcs(source.removeprefix("gs://tfrp-test/"))
    found = listings.listed_identities([*many, *few])
    assert _listings(proxy) == 1 and not any(name for _, name in proxy.requests)
    assert set(found) == set(many)  # "few" holds too few of them to pay for a listing
    assert found == {uri: fileio.identity(uri) for uri in many}  # what a stat of each gives


def _paged_store(scripted_store, count: int) -> list:
    """A store listing a folder of `count` objects `f/000.jpg`..., 5 a page, from `startOffset`
    on, as Cloud Storage pages a listing (the emulator ignores both); returns the list of the
    (startOffset, pageToken) each listing request asked."""
    names = [f"f/{index:03d}.jpg" for index in range(count)]
    asked = []

    def answer(target: str, headers: dict, out) -> bool:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query)
        first, token = query["startOffset"][0], query.get("pageToken", [None])[0]
        asked.append((first, token))
        listed, at = [name for name in names if name >= first], int(token or 0)
        page = {"items": [{"name": name, "size": "1", "crc32c": "c"} for name in listed[at:][:5]]}
        page.update({"nextPageToken": str(at + 5)} if at + 5 < len(listed) else {})
        out.write(response(json.dumps(page).encode(), Content_Type="application/json"))
        return True

    scripted_store(answer)
    return asked


def test_rows_fingerprinted_from_listings_and_from_stats_keep_their_order(tmp_path, gcs):
    source = _folders(tmp_path, gcs, {"many": 20, "few": 3})
    uris = [*_uris(source, "few", range(3)), *_uris(source, "many", range(20))]
    rows = [manifest_row(f"cat/{index}", uri=uri) for index, uri in enumerate(reversed(uris))]
    assert row_fingerprints(rows) == [row_fingerprint(row) for row in rows]
    assert len(set(row_fingerprints(rows))) == len(rows)


def test_a_listing_reads_a_page_for_every_few_wanted_objects_from_the_first(scripted_store):
    """A folder holding many more objects than are wanted is not listed whole: from the first
    name wanted, until the last, a page for every LIST_PAGE_ROWS of them at most; what those
    pages did not reach is left to stats."""
    asked = _paged_store(scripted_store, 100)
    wanted = [f"gs://b/f/{index:03d}.jpg" for index in range(40, 40 + listings.LIST_PAGE_ROWS)]
    found = listings.listed_identities(wanted)
    assert asked == [("f/040.jpg", None)]  # one page allowed: 040-044
    assert set(found) == set(wanted[:5]) and set(found.values()) == {"1:c"}
    asked.clear()
    near = ["gs://b/f/040.jpg", "gs://b/f/042.jpg"] * listings.LIST_PAGE_ROWS  # 2 pages allowed
    assert set(listings.listed_identities(near)) == set(near)
    assert asked == [("f/040.jpg", None)]  # its first page reached the last wanted
    asked.clear()
    spread = [f"gs://b/f/{index:03d}.jpg" for index in range(0, 130, 5)]  # 26: 2 pages
    assert len(listings.listed_identities(spread)) == 2
    assert asked == [("f/000.jpg", None), ("f/000.jpg", "5")]


def test_a_refused_listing_leaves_its_folder_to_stats(scripted_store):
    """An account may read objects without the right to list them."""
    refusal = json.dumps({"error": {"code": 403, "message": "storage.objects.list denied"}})

    def refuse(target: str, headers: dict, out) -> bool:
        out.write(response(refusal.encode(), "403 Forbidden", Content_Type="application/json"))
        return True

    scripted_store(refuse)
    wanted = [f"gs://b/f/{index:03d}.jpg" for index in range(listings.LIST_PAGE_ROWS)]
    assert listings.listed_identities(wanted) == {}


def test_listings_through_faults_find_what_a_clean_listing_finds(tmp_path, gcs, faulty_gcs):
    source = _folders(tmp_path, gcs, {"a": 20, "b": 20})
    prefix = source.removeprefix("gs://tfrp-test/")
    wanted = [*_uris(source, "a", range(20)), *_uris(source, "b", range(20))]
    clean = listings.listed_identities(wanted)
    proxy = faulty_gcs(f"{prefix}/", rate=0.5, seed=3, listings_too=True)
    assert listings.listed_identities(wanted) == clean and len(clean) == 40
    assert proxy.faults  # it met faults, and retried through them


def test_a_folder_whose_listing_keeps_failing_is_left_to_stats(tmp_path, gcs, faulty_gcs):
    source = _folders(tmp_path, gcs, {"a": 20, "b": 20})
    prefix = source.removeprefix("gs://tfrp-test/")
    faulty_gcs(f"{prefix}/", always={f"{prefix}/b/": "503"}, listings_too=True)
    wanted = [*_uris(source, "a", range(20)), *_uris(source, "b", range(20))]
    assert set(listings.listed_identities(wanted)) == set(_uris(source, "a", range(20)))


@pytest.mark.slow
@pytest.mark.parametrize("runner", ["local", "beam"])
def test_a_refresh_in_a_bucket_lists_folders_instead_of_a_stat_per_image(
    tmp_path, gcs, faulty_gcs, runner
):
    """Every image folder holds 13 images: a refresh fingerprints them from one listing each,
    and keeps every record a refresh by stats keeps."""
    rows = make_images(tmp_path / "src", per_class=listings.LIST_PAGE_ROWS)
    write_manifest(tmp_path / "src" / "older.csv", rows[:-2])
    write_manifest(tmp_path / "src" / "manifest.csv", rows)
    prefix = f"refresh-{tmp_path.name}"
    source = gcs(tmp_path / "src", prefix)
    beam = ["--runner", "DirectRunner"] if runner == "beam" else []
    argv = arguments("--output {out} --no_progress --num_shards 2", out=tmp_path / f"root-{runner}")
    run(["--manifest", f"{source}/older.csv", *argv, *beam])
    proxy = faulty_gcs(f"{prefix}/")
    refreshed = run(["--manifest", f"{source}/manifest.csv", *argv, *beam, "--incremental"])
    folders = {row["image_uri"].rpartition("/")[0] for row in rows}
    assert refreshed.info.records == len(rows)
    # No image gets a stat for its fingerprint: only the two new ones are read, each once (its
    # media). Beam's plan also stats up to 64 rows of each split, to size shard pieces: here
    # every row, once.
    sampled = 1 if runner == "beam" else 0
    names = [f"{prefix}/{row['image_uri']}" for row in rows]
    asked = {name: proxy.requests["GET", name] for name in names}
    assert asked == {name: sampled + (name in names[-2:]) for name in names}
    assert _listings(proxy) >= len(folders)
