"""The upload state: what the server has accepted survives the process, an interrupted
write loses at most its own line, and a state that cannot be used is started afresh."""

from __future__ import annotations

import uuid
from pathlib import Path

from hsearch.client.state import UploadState, state_path

SERVER = "http://127.0.0.1:8000"
JOB_1 = uuid.UUID(int=1)
JOB_2 = uuid.UUID(int=2)


def open_state(tmp_path: Path, *, restart: bool = False, key: str | None = None) -> UploadState:
    return UploadState.open(
        tmp_path / "state", server=SERVER, api_key=key, root=tmp_path / "docs", restart=restart
    )


def test_what_was_sent_is_held_until_its_job_says_otherwise(tmp_path: Path) -> None:
    state = open_state(tmp_path)
    state.record_sent(JOB_1, [("a", "h-a"), ("b", "h-b"), ("c", "h-c")])

    again = open_state(tmp_path)
    assert again.holder("a", "h-a") == JOB_1  # running: accepted, in flight
    assert again.holder("a", "changed") is None  # other content: send it
    assert again.holder("z", "h-z") is None
    assert again.unfinished_jobs() == {JOB_1}

    again.record_outcome(JOB_1, status="partial", failed=frozenset({"b"}))
    final = open_state(tmp_path)
    assert final.finished(JOB_1)
    assert final.unfinished_jobs() == set()
    assert (final.holder("a", "h-a"), final.holder("b", "h-b")) == (JOB_1, None)


def test_a_job_that_did_not_list_its_failures_accepts_nothing(tmp_path: Path) -> None:
    state = open_state(tmp_path)
    state.record_sent(JOB_1, [("a", "h-a")])
    state.record_sent(JOB_2, [("b", "h-b")])
    state.record_outcome(JOB_1, status="partial", failed=None)  # more failures than listed
    state.record_outcome(JOB_2, status="cancelled", failed=frozenset())
    again = open_state(tmp_path)
    assert (again.holder("a", "h-a"), again.holder("b", "h-b")) == (None, None)


def test_a_document_sent_again_belongs_to_its_newer_job(tmp_path: Path) -> None:
    state = open_state(tmp_path)
    state.record_sent(JOB_1, [("a", "v1")])
    state.record_outcome(JOB_1, status="succeeded", failed=frozenset())
    state.record_sent(JOB_2, [("a", "v2")])
    again = open_state(tmp_path)
    assert (again.holder("a", "v1"), again.holder("a", "v2")) == (None, JOB_2)
    # Compacted: the first job holds nothing any more, so it is gone from the file.
    text = again.path.read_text()
    assert str(JOB_1) not in text
    assert text.count("\n") == 2  # the header and JOB_2's documents


def test_a_torn_last_line_is_ignored(tmp_path: Path) -> None:
    state = open_state(tmp_path)
    state.record_sent(JOB_1, [("a", "h-a")])
    with state.path.open("a") as log:
        log.write('{"job": "' + str(JOB_2) + '", "sent": [["b", "h')  # the process died here
    again = open_state(tmp_path)
    assert again.warning is None
    assert (again.holder("a", "h-a"), again.holder("b", "h-b")) == (JOB_1, None)


def test_an_unreadable_state_is_started_afresh_with_a_warning(tmp_path: Path) -> None:
    state = open_state(tmp_path)
    state.record_sent(JOB_1, [("a", "h-a")])
    lines = state.path.read_text().splitlines()
    state.path.write_text("\n".join([lines[0], "garbage", *lines[1:]]) + "\n")
    again = open_state(tmp_path)
    assert again.warning is not None
    assert "unreadable" in again.warning
    assert again.holder("a", "h-a") is None


def test_restart_forgets_everything(tmp_path: Path) -> None:
    open_state(tmp_path).record_sent(JOB_1, [("a", "h-a")])
    assert open_state(tmp_path, restart=True).holder("a", "h-a") is None
    assert open_state(tmp_path).holder("a", "h-a") is None  # and the file says so


def test_each_server_and_key_has_its_own_state_and_the_key_is_not_stored(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    paths = {
        state_path(tmp_path, server=server, api_key=key, root=root)
        for server in (SERVER, "http://other:8000")
        for key in (None, "key-one", "key-two")
    }
    assert len(paths) == 6
    state = open_state(tmp_path, key="secret-key-value")
    state.record_sent(JOB_1, [("a", "h-a")])
    assert "secret-key-value" not in state.path.name + state.path.read_text()
    assert open_state(tmp_path, key="another-key").holder("a", "h-a") is None
