"""The newest surfaces, probed as a user and an attacker would (issue 46): each case is run in its
command-line form where the finding was made there, through the real CLI: in this process
(``tests.helpers.cli``), or in a fresh one where the process is the point (what /proc shows of its
environment, a deadline that must end a hung read, a terminal's absence, Ctrl-C, two loads)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from tests.helpers import cli, cli_process

RERANKING = [
    {"query": "where is the cat", "positive": ["the cat is on the mat"], "negative": ["the dog is in the yard"]},
    {"query": "what does the dog do", "positive": ["the dog barks loudly"], "negative": ["the cat sleeps"]},
    {"query": "who sings", "positive": ["a bird sings at dawn"], "negative": ["cars drive fast"]},
]


def _reranking_project(folder: Path, instruction: str) -> None:
    (folder / "rb.jsonl").write_text("".join(json.dumps(line) + "\n" for line in RERANKING))
    (folder / "benchharness.toml").write_text(
        f'[paths]\ncache_dir = ".cache"\n\n[tasks.rb]\nkind = "reranking"\nfile = "rb.jsonl"\n'
        f"instruction = {json.dumps(instruction)}\n"
    )


def _status(stdout: str) -> str:
    row = next(line for line in stdout.splitlines() if line.startswith("| hf:") and "| rb " in line)
    return row.split("|")[3].strip()


def test_changing_only_a_tasks_instruction_recomputes_its_result(tmp_path, tiny_bert):
    """The instruction is part of what the encoder is asked to encode: a stored result computed
    under another one is not reused (it was: 'reused' with the old instruction's score)."""
    spec = f"hf:{tiny_bert}?document_prompt=passage:%20"
    run = ("run", "--encoders", spec, "--tasks", "rb", "--no-cache")
    _reranking_project(tmp_path, "Find the answer to: ")
    first = cli(tmp_path, *run)
    assert first.returncode == 0 and _status(first.stdout) == "computed", first.stderr
    _reranking_project(tmp_path, "Retrieve a passage that mentions: ")
    second = cli(tmp_path, *run)
    assert second.returncode == 0 and _status(second.stdout) == "computed", second.stdout
    [stored] = (tmp_path / "results").glob("*/rb.json")
    record = json.loads(stored.read_text())
    assert record["protocol"]["instruction"] == "Retrieve a passage that mentions: "
    assert record["encoder_metadata"]["prompts_applied"]["query"] == "Retrieve a passage that mentions: "
    third = cli(tmp_path, *run)  # nothing changed: reused, as before
    assert third.returncode == 0 and _status(third.stdout) == "reused", third.stdout


SECRET = "ghp_" + "s3cr3t" * 8


def _beir(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "a cat"}\n{"_id": "d2", "text": "a dog"}\n')
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "cat"}\n')
    return folder


def test_a_data_file_leading_into_proc_is_refused_and_no_error_quotes_a_files_content(tmp_path):
    """A qrels file or a pairs file that links to /proc/self/environ was followed, and the error
    quoted its first line: every environment variable. Now: refused, naming where it leads; a
    header of a regular file is quoted as a short excerpt only."""
    beir = _beir(tmp_path / "beir")
    (beir / "qrels" / "test.tsv").symlink_to("/proc/self/environ")
    (tmp_path / "pairs.csv").symlink_to("/proc/self/environ")
    (tmp_path / "long.csv").write_text(f"sentence1,sentence2,TOKEN={SECRET}\na,b,1\n")
    (tmp_path / "benchharness.toml").write_text(
        '[paths]\ncache_dir = ".cache"\n\n[tasks.my-beir]\nkind = "retrieval"\nfolder = "beir"\n\n'
        '[tasks.my-pairs]\nfile = "pairs.csv"\n\n[tasks.my-long]\nfile = "long.csv"\n'
    )
    env = {"CI_DEPLOY_TOKEN": SECRET}
    for task, needle in (("my-beir", "test.tsv: leads to /proc/"), ("my-pairs", "pairs.csv: leads to /proc/")):
        done = cli_process(tmp_path, "run", "--encoders", "glove-50d", "--tasks", task, "--no-cache", env=env)
        assert SECRET not in done.stdout + done.stderr
        assert needle in done.stdout + done.stderr and "a file of the system" in done.stdout + done.stderr
    done = cli_process(tmp_path, "run", "--encoders", "glove-50d", "--tasks", "my-long", "--no-cache", env=env)
    assert SECRET not in done.stdout + done.stderr
    assert "no column 'score'; found 'sentence1, sentence2, TOKEN=ghp_s3cr3t" in done.stdout + done.stderr


def test_a_symlink_to_data_elsewhere_is_followed_and_a_folder_is_not_a_data_file(tmp_path):
    from benchharness.core.data_root import DataError
    from benchharness.data.readers import check_data_file

    elsewhere = tmp_path / "elsewhere.csv"
    elsewhere.write_text("sentence1,sentence2,score\na,b,1\n")
    (tmp_path / "link.csv").symlink_to(elsewhere)
    check_data_file(tmp_path / "link.csv")  # followed: a researcher's data may live anywhere
    with pytest.raises(DataError, match="not a regular file"):
        check_data_file(tmp_path)
    with pytest.raises(DataError, match="a file of the system"):
        check_data_file(Path("/dev/null"))


# ---- openai: a server that redirects, one that drips --------------------------------------------


class _Server:
    """An OpenAI-compatible server on 127.0.0.1 in a thread, logging every request it receives
    (method, path, headers); ``answer(handler)`` answers each one."""

    def __init__(self, answer) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.received: list[tuple[str, str, dict[str, str]]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _any(self) -> None:
                raw = (
                    self.rfile.read(int(self.headers["Content-Length"])) if self.headers.get("Content-Length") else b""
                )
                self.body = json.loads(raw) if raw else None
                server.received.append((self.command, self.path, dict(self.headers)))
                # a client that gave up leaves nothing to answer; left to the server, its traceback
                # would land on whatever sys.stderr is by then, perhaps a later test's captured output
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    answer(self)

            do_GET = do_POST = _any

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.port = self.http.server_address[1]
        threading.Thread(target=self.http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


def _pairs_project(folder: Path) -> None:
    (folder / "pairs.csv").write_text("sentence1,sentence2,score\na cat,a dog,1\nthe sun,the moon,2\nrain,snow,3\n")
    (folder / "benchharness.toml").write_text('[paths]\ncache_dir = ".cache"\n\n[tasks.mine]\nfile = "pairs.csv"\n')


def test_a_redirect_to_another_origin_gets_neither_the_key_nor_the_sentences(tmp_path):
    """The server at 127.0.0.1:P redirects to localhost:Q; urllib followed it with the
    ``Authorization`` header. Now the run fails in one line naming the redirect, and the other
    origin receives nothing."""
    other = _Server(lambda h: (h.send_response(200), h.end_headers()))

    def redirect(handler) -> None:
        handler.send_response(302)
        handler.send_header("Location", f"http://localhost:{other.port}{handler.path}")
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    first = _Server(redirect)
    try:
        _pairs_project(tmp_path)
        spec = f"openai:m?base_url=http://127.0.0.1:{first.port}/v1&api_key_env=MY_API_KEY&identity=pinned&retries=0"
        done = cli(tmp_path, "run", "--encoders", spec, "--tasks", "mine", "--no-cache", env={"MY_API_KEY": SECRET})
    finally:
        first.close()
        other.close()
    assert first.received and other.received == []
    assert f"redirects to another origin (http://localhost:{other.port}/v1/" in done.stdout + done.stderr
    assert SECRET not in done.stdout + done.stderr


def _drip(handler) -> None:
    """Headers, then one byte of the body every half second: a read never waits long enough to time out."""
    import time

    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", "100000")
    handler.end_headers()
    try:
        for _ in range(400):
            handler.wfile.write(b" ")
            handler.wfile.flush()
            time.sleep(0.5)
    except OSError:
        pass


def test_a_server_that_drips_its_answer_meets_the_requests_deadline(tmp_path):
    import time

    server = _Server(_drip)
    try:
        _pairs_project(tmp_path)
        spec = f"openai:m?base_url=http://127.0.0.1:{server.port}/v1&identity=pinned&timeout=2&retries=0"
        start = time.monotonic()
        done = cli_process(tmp_path, "run", "--encoders", spec, "--tasks", "mine", "--no-cache", timeout=120)
        took = time.monotonic() - start
    finally:
        server.close()
    assert "did not answer within 2 s (timeout=)" in done.stdout + done.stderr
    assert took < 30  # was: for ever (each read got its byte in time)


def _drip_after_the_probe(handler) -> None:
    """No model listing, a real answer to the encoder's probe (sent before its pool of requests
    starts), then drips: the run waits in the pool's threads, which Ctrl-C must end too."""
    from benchharness.encoders.openai_api import PROBE

    if handler.command == "GET":
        handler.send_response(404)
        handler.send_header("Content-Length", "0")
        handler.end_headers()
    elif handler.body and handler.body.get("input") == [PROBE]:
        body = json.dumps({"model": "m", "data": [{"index": 0, "embedding": [1.0, 0.0, 0.5]}]}).encode()
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
    else:
        _drip(handler)


def test_ctrl_c_ends_a_run_waiting_on_a_dripping_server_within_seconds(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    server = _Server(_drip_after_the_probe)
    try:
        _pairs_project(tmp_path)
        spec = f"openai:m?base_url=http://127.0.0.1:{server.port}/v1&identity=pinned&retries=0"  # timeout 60 s
        proc = subprocess.Popen(
            [sys.executable, "-m", "benchharness.cli", "run", "--encoders", spec, "--tasks", "mine", "--no-cache"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while sum(method == "POST" for method, _, _ in server.received) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        start = time.monotonic()
        try:
            proc.communicate(timeout=20)
        finally:
            proc.kill()
        assert time.monotonic() - start < 10
        assert proc.returncode != 0
    finally:
        server.close()


def test_a_run_manifest_naming_a_served_model_is_refused_before_any_request(tmp_path):
    """A run folder (downloaded, shared) whose manifest names the openai family with a key variable
    and a server of its choosing sent that variable and the sentences there. Now refused in one
    line; the server receives nothing, whether the run is named by folder or by its name."""
    server = _Server(lambda h: (h.send_response(200), h.end_headers()))
    try:
        _pairs_project(tmp_path)
        (tmp_path / "benchharness.toml").write_text(
            '[paths]\ncache_dir = ".cache"\nruns_dir = "runs"\n\n[tasks.mine]\nfile = "pairs.csv"\n'
        )
        run = tmp_path / "runs" / "x"
        run.mkdir(parents=True)
        encoder = {
            "type": "openai",
            "model": "m",
            "base_url": f"http://127.0.0.1:{server.port}/v1",
            "api_key_env": "GITHUB_TOKEN",
            "identity": "pinned",
        }
        (run / "manifest.json").write_text(json.dumps({"name": "x", "encoder": encoder}))
        (run / "m").touch()  # what the run's (relative) model names exists, as a trained run's model/ does
        for name in (str(run), "x"):
            done = cli(
                tmp_path, "run", "--encoders", name, "--tasks", "mine", "--no-cache", env={"GITHUB_TOKEN": SECRET}
            )
            assert "names the 'openai' family; a run manifest may name only the families" in done.stderr, done.stderr
    finally:
        server.close()
    assert server.received == []


def test_a_degenerate_encoder_gets_no_retrieval_score_and_ties_are_counted(tmp_path, tiny_bert):
    """A document prompt longer than max_length leaves every document the same vector: the ranking
    was the corpus order, stored as nDCG@10 with no note. Now refused, saying why; a normal run
    records its ties."""
    beir = _beir(tmp_path / "beir")
    (beir / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"_id": f"d{i}", "text": f"document number {i} about {w}"}) + "\n"
            for i, w in enumerate("abcdef")
        )
    )
    (beir / "queries.jsonl").write_text('{"_id": "q1", "text": "about c"}\n{"_id": "q2", "text": "about e"}\n')
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\nq2\td4\t1\n")
    (tmp_path / "benchharness.toml").write_text(
        '[paths]\ncache_dir = ".cache"\n\n[tasks.my-beir]\nkind = "retrieval"\nfolder = "beir"\n'
    )
    long_prompt = "%20".join(["represent this passage for retrieval"] * 4)
    spec = f"hf:{tiny_bert}?max_length=8&document_prompt={long_prompt}"
    done = cli(tmp_path, "run", "--encoders", spec, "--tasks", "my-beir", "--no-cache")
    assert done.returncode != 0
    assert "my-beir: every query scores all its top documents alike" in done.stdout + done.stderr
    assert not list((tmp_path / "results").glob("*/my-beir.json"))

    # a random tiny BERT puts every text near one vector (cosines within 1e-5): GloVe tells them apart
    done = cli(tmp_path, "run", "--encoders", "glove-50d", "--tasks", "my-beir", "--no-cache")
    assert done.returncode == 0, done.stderr
    [stored] = (tmp_path / "results").glob("*/my-beir.json")
    assert isinstance(json.loads(stored.read_text())["metrics"]["ties"], int)


def test_ties_are_counted_by_hand():
    import numpy as np

    from benchharness.scoring.top_k import ConstantScoresError, exact_ties, refuse_constant

    scores = np.array([[0.9, 0.9, 0.5, -np.inf], [0.7, 0.6, 0.6, 0.6]])
    assert exact_ties(scores) == 1 + 2  # the padding's -inf is no tie
    refuse_constant(scores, "t")  # not every list is constant
    with pytest.raises(ConstantScoresError, match="t: every query scores all its top documents alike"):
        refuse_constant(np.array([[0.3, 0.3, -np.inf], [0.8, 0.8, 0.8]]), "t")
    with pytest.raises(ConstantScoresError):  # one vector in two rows of a batch: float32 units apart
        refuse_constant(np.array([[0.999986, 0.999986], [0.5, 0.5 + 6e-8]], np.float32), "t")
    refuse_constant(np.array([[0.9, 0.9], [0.5, 0.5 + 1e-4]]), "t")  # a real difference


def test_a_refused_task_table_leaves_the_others_and_asking_for_it_says_why(tmp_path):
    """``file =`` where a retrieval table needs ``folder =``: every file task became unknown, and
    asking for it gave "unknown task ... Did you mean: sts?". Now that table alone is left out, and
    its name is answered with the reason."""
    _pairs_project(tmp_path)
    _beir(tmp_path / "beir")
    with (tmp_path / "benchharness.toml").open("a") as fh:
        fh.write('\n[tasks.stsb-beir]\nkind = "retrieval"\nfile = "beir"\n')
    done = cli(tmp_path, "run", "--encoders", "glove-50d", "--tasks", "stsb-beir", "--no-cache")
    error = [line for line in done.stderr.splitlines() if line.startswith("benchharness: error:")]
    assert done.returncode == 2 and len(error) == 1, done.stderr
    assert "task 'stsb-beir' is declared but was refused:" in error[0] and "folder" in error[0]
    assert "Did you mean" not in error[0]
    done = cli(tmp_path, "run", "--encoders", "glove-50d", "--tasks", "mine", "--no-cache")
    assert done.returncode == 0, done.stderr


def test_progress_bars_stay_off_when_standard_error_is_not_a_terminal(tmp_path, tiny_bert):
    """A log file or CI got a progress bar's frames (carriage returns, or a line per refresh): the
    first line of a --verify log was about 8 KB."""
    _pairs_project(tmp_path)
    done = cli_process(tmp_path, "run", "--encoders", f"hf:{tiny_bert}", "--tasks", "mine", "--no-cache")
    assert done.returncode == 0, done.stderr
    assert "%|" not in done.stderr and "\r" not in done.stderr  # no bar, in frames or in lines


def test_no_message_shows_the_key_even_when_the_server_echoes_it(tmp_path):
    def echo(handler) -> None:
        body = json.dumps({"error": {"message": f"bad request from {handler.headers.get('Authorization')}"}}).encode()
        handler.send_response(400)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    server = _Server(echo)
    try:
        _pairs_project(tmp_path)
        spec = f"openai:m?base_url=http://127.0.0.1:{server.port}/v1&api_key_env=MY_API_KEY&identity=pinned"
        done = cli(tmp_path, "run", "--encoders", spec, "--tasks", "mine", "--no-cache", env={"MY_API_KEY": SECRET})
    finally:
        server.close()
    assert server.received  # the server did get the key: it is its key
    assert SECRET not in done.stdout + done.stderr
    assert "bad request from Bearer <the key in $MY_API_KEY>" in done.stdout + done.stderr


def test_a_password_in_base_url_is_refused_without_showing_it(tmp_path):
    _pairs_project(tmp_path)
    spec = f"openai:m?base_url=http://user:{SECRET}@127.0.0.1:9/v1&identity=pinned"
    done = cli(tmp_path, "run", "--encoders", spec, "--tasks", "mine", "--no-cache")
    assert done.returncode == 2 and SECRET not in done.stdout + done.stderr
    assert "holds a user name or password (not shown)" in done.stderr


def test_a_corpus_line_beyond_the_bound_is_refused_by_line_not_read_whole(tmp_path):
    """A corpus line of gigabytes ended in a MemoryError traceback; now the reader stops at
    ``MAX_LINE_CHARS`` and names the line (the bound made small here; its real size through the CLI below)."""
    from benchharness.core.data_root import DataError
    from benchharness.data.readers import numbered_lines

    path = tmp_path / "corpus.jsonl"
    path.write_text('{"_id": "d1", "text": "short"}\n' + "x" * 500 + "\n")
    with path.open() as fh, pytest.raises(DataError, match=r"corpus.jsonl:2: a line longer than 100 characters"):
        list(numbered_lines(fh, path, limit=100))


def test_an_oversized_corpus_line_fails_in_one_line_through_the_cli(tmp_path):
    from benchharness.data.readers import MAX_LINE_CHARS

    beir = _beir(tmp_path / "beir")
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    with (beir / "corpus.jsonl").open("a") as fh:
        fh.write('{"_id": "d3", "text": "' + "x" * (MAX_LINE_CHARS + 10) + '"}\n')
    (tmp_path / "benchharness.toml").write_text(
        '[paths]\ncache_dir = ".cache"\n\n[tasks.my-beir]\nkind = "retrieval"\nfolder = "beir"\n'
    )
    done = cli(tmp_path, "run", "--encoders", "glove-50d", "--tasks", "my-beir", "--no-cache")
    assert "corpus.jsonl:3: a line longer than 67,108,864 characters" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr


def test_one_checkpoint_loaded_twice_with_different_random_states_has_one_identity():
    """paraphrase-MiniLM-L3-v2 ships no pooler, so each load draws one at random; its hash made two
    identities of one model (every run recomputed, the cache grew a folder). The pooler reaches no
    output of a SentenceTransformer, and is no longer hashed. Two loads under two seeds stand for
    two processes: the pools they draw differ, the identities must not."""
    import torch
    from sentence_transformers import SentenceTransformer

    from benchharness.evaluation.models import as_encoder
    from tests.helpers import MINILM_L3

    loads = []
    with torch.random.fork_rng():  # the seeds below stay inside this test
        for seed in (1, 2):
            torch.manual_seed(seed)  # the checkpoint has no pooler: transformers draws one at random
            loads.append(SentenceTransformer(MINILM_L3, device="cpu"))
    pools = [model[0].auto_model.pooler.dense.weight for model in loads]
    assert not torch.equal(*pools), "both loads drew the same pooler: the test shows nothing"
    identities = {as_encoder(model).identity for model in loads}
    assert len(identities) == 1 and all(identities)


def test_a_result_from_files_nobody_pinned_records_verified_false(tmp_path):
    """A probing file missing its last lines was scored and recorded ``verified: true``. Files
    without a known sha256 are read as they are; their results now say so. STS-B's are pinned."""
    from tests.helpers import DATA

    data = tmp_path / "data"
    (data / "probing").mkdir(parents=True)
    lines = [
        f"{split}\t{label}\tthe {label.lower()} sentence {i} k{j}"
        for split, n in (("tr", 60), ("va", 20), ("te", 20))
        for i in range(n)
        for j, label in enumerate(("PAST", "PRES"))
        if i % 2 == j
    ]
    (data / "probing" / "past_present.txt").write_text("\n".join(lines) + "\n")
    for folder in ("senteval", "glove"):
        (data / folder).symlink_to(DATA / folder)
    (tmp_path / "benchharness.toml").write_text('[paths]\ncache_dir = ".cache"\n')
    run = ("run", "--encoders", "glove-50d", "--no-cache", "--data-dir", str(data), "--tasks")
    done = cli(tmp_path, *run, "Tense-fast,STSBenchmark")
    assert done.returncode == 0, done.stderr
    verified = {p.stem: json.loads(p.read_text())["data"]["verified"] for p in (tmp_path / "results").glob("*/*.json")}
    assert verified == {"Tense-fast": False, "STSBenchmark": True}


def test_two_threads_sharing_a_cache_folder_both_finish_and_leave_it_whole(tmp_path):
    """Two threads of one process on one cache_dir failed with a lock KeyError and 'table meta
    already exists', leaving damaged cache files: the lock's re-entrancy was the process's, not the
    thread's. Now the second thread waits for the first."""
    import threading

    import benchharness

    tasks = ["STSBenchmark", "SICKRelatedness-trial"]
    outcomes: dict[int, object] = {}

    def run(i: int) -> None:
        try:
            outcomes[i] = benchharness.evaluate("glove-50d", tasks, cache_dir=tmp_path / "cache", intervals=False)
        except Exception as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert all(isinstance(o, benchharness.Results) and not o.failed for o in outcomes.values()), outcomes
    scores = [[r.main_score for r in outcomes[i]] for i in range(2)]
    assert scores[0] == scores[1]
    again = benchharness.evaluate("glove-50d", tasks, cache_dir=tmp_path / "cache", intervals=False)
    assert [r.main_score for r in again] == scores[0] and not again.failed
    assert not list((tmp_path / "cache").rglob("*damaged*")) and not list((tmp_path / "cache").rglob("*quarantine*"))


def test_prompts_are_text_bounded_and_warned_about_when_they_leave_no_room(tmp_path, tiny_bert):
    """``?prompt=1`` became the number 1 (refused); a prompt longer than max_length gave no warning
    (every sentence then encodes alike); a 1 MB prompt tokenised for minutes; a lone surrogate
    gave a tokenizer traceback."""
    _pairs_project(tmp_path)
    base = f"hf:{tiny_bert}?max_length=16"
    done = cli(tmp_path, "run", "--encoders", f"{base}&prompt=1", "--tasks", "mine", "--no-cache")
    assert done.returncode == 0, done.stderr
    [stored] = (tmp_path / "results").glob("*/mine.json")
    assert json.loads(stored.read_text())["encoder_metadata"]["prompts_applied"] == {"default": "1"}

    long = "%20".join(["represent this sentence for searching relevant passages"] * 3)
    done = cli(tmp_path, "run", "--encoders", f"{base}&prompt={long}", "--tasks", "mine", "--no-cache")
    assert "of the 16 tokens a sentence keeps (max_length): nothing of a sentence is left" in done.stderr

    huge = "x" * 5000
    done = cli(tmp_path, "run", "--encoders", f"{base}&prompt={huge}", "--tasks", "mine", "--no-cache")
    assert done.returncode == 2 and "prompt is 5,000 characters; a prompt is at most 4,096" in done.stderr

    from benchharness.core.errors import InvalidInputError
    from benchharness.evaluation.resolver import spec_prompts

    with pytest.raises(InvalidInputError, match="which is not text"):
        spec_prompts("e", {"type": "hf", "model": "m", "prompt": "query: \ud800"})


def test_sentences_edited_after_they_were_written_are_refused_by_vectors(tmp_path):
    """Swapped lines in sentences.jsonl were scored silently (52.96 against a true 52.85): the
    digest `sentences` writes now ties the lines to the rows computed for them."""
    import numpy as np

    _pairs_project(tmp_path)
    done = cli(tmp_path, "sentences", "--tasks", "mine", "--out", "vec")
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "vec" / "sentences.jsonl").read_text().splitlines(keepends=True)
    np.save(tmp_path / "vec" / "vectors.npy", np.random.default_rng(0).normal(size=(len(lines), 4)).astype("f4"))
    run = ("run", "--encoders", "vectors:vec", "--tasks", "mine", "--no-cache")
    assert cli(tmp_path, *run).returncode == 0
    (tmp_path / "vec" / "sentences.jsonl").write_text("".join([lines[1], lines[0], *lines[2:]]))
    done = cli(tmp_path, *run)
    assert "sentences.jsonl changed since `benchharness sentences` wrote it" in done.stdout + done.stderr


def test_the_guides_server_recipe_is_the_command_the_server_tests_run():
    """The guide shows how to start a served model (a user found it only in .ci/ and tests/): its
    command must stay the one tests/embedding_server.py runs, which the openai: fidelity test
    checks scores what the checkpoint scores in process."""
    import shlex

    from tests.embedding_server import MODEL, serve_arguments
    from tests.helpers import ROOT

    guide = (ROOT / "docs" / "guide" / "retrieval-and-prompts.md").read_text()
    [line] = [line for line in guide.splitlines() if "bin/infinity_emb v2" in line]
    words = shlex.split(line)
    assert words[1].endswith("infinity_emb") and words[2:] == serve_arguments(MODEL, 7997)
    [install] = [line for line in guide.splitlines() if "pip install" in line and "infinity-emb" in line]
    script = (ROOT / ".ci" / "embedding_server_env").read_text()
    assert shlex.split(install)[-1] in script  # the pinned release the tests use
    assert "base_url=http://127.0.0.1:7997/v1&identity=" in guide
