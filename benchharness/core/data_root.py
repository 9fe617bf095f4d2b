"""The data root: where evaluation files are, whether they are intact, and where to get them.

Every file a task reads goes through ``DataRoot.path``: a missing file raises with the dataset's
download source, a file whose sha256 differs from the pinned one (``data_checksums.json``, the
canonical copies of SentEval's downstream data and the other sources) raises naming the file.
The pinned checksums make a score traceable to the exact bytes it was computed on; results store
the digest of every file a task read.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO

from benchharness.core.atomic import atomic_file
from benchharness.core.errors import UserError
from benchharness.core.settings import DATA_ENV as ENV_VAR
from benchharness.core.settings import default_data_dir

#: download chunk size and the seconds a connection may stay silent
CHUNK = 1 << 20
TIMEOUT_S = 60
CHECKSUMS: dict[str, str] = json.loads((Path(__file__).with_name("data_checksums.json")).read_text())


@dataclass(frozen=True)
class Source:
    """A downloadable dataset: where it comes from and which folder of the data root it fills."""

    name: str
    folder: str
    url: str
    note: str


SOURCES: dict[str, Source] = {
    s.name: s
    for s in (
        Source(
            "senteval",
            "senteval",
            "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/senteval.tar",
            "SentEval's data/downstream tree (STS12-16, STS-B, SICK, MR, CR, SUBJ, MPQA, SST, TREC, MRPC, SNLI) "
            "as SentEval's get_transfer_data.bash leaves it, packed by the SimCSE authors",
        ),
        Source(
            "glove",
            "glove",
            "https://nlp.stanford.edu/data/glove.6B.zip",
            "GloVe 6B vectors; glove-50d reads glove/glove.6B.50d.txt (or a .gz, or the shared subset)",
        ),
        Source(
            "askubuntu",
            "askubuntu",
            "https://github.com/taolei87/askubuntu",
            "text_tokenized.txt.gz, dev.txt, test.txt from the repository's master branch",
        ),
        Source(
            "qqp",
            "qqp",
            "http://qim.fb.com/quora_duplicate_questions.tsv",
            "Quora Question Pairs, quora_duplicate_questions.tsv",
        ),
        Source(
            "nli",
            "nli",
            "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/nli_for_simcse.csv",
            "SimCSE's SNLI+MNLI triples (sent0,sent1,hard_neg) for supervised training",
        ),
        Source(
            "probing",
            "probing",
            "https://github.com/facebookresearch/SentEval/tree/main/data/probing",
            "SentEval's ten probing task files (sentence_length.txt, word_content.txt, ...), "
            "100k train / 10k dev / 10k test lines each",
        ),
        Source(
            "nltk",
            "nltk_data",
            "nltk.download('wordnet'), nltk.download('stopwords')",
            "NLTK data dir with corpora/wordnet and corpora/stopwords",
        ),
    )
}


#: the files of SentEval's data/probing folder, one per probing task (``benchharness.tasks.senteval.probing``)
PROBING_FILES = (
    "sentence_length.txt",
    "word_content.txt",
    "tree_depth.txt",
    "top_constituents.txt",
    "bigram_shift.txt",
    "past_present.txt",
    "subj_number.txt",
    "obj_number.txt",
    "odd_man_out.txt",
    "coordination_inversion.txt",
)


class DataError(UserError):
    """Missing or corrupt evaluation data; the message says which file and how to get it."""


@lru_cache(maxsize=4096)
def _sha256(path: str, size: int, mtime: float) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(8 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """sha256 of a file, memoised on (path, size, mtime) so reruns in one process are free."""
    st = path.stat()
    return _sha256(str(path), st.st_size, st.st_mtime)


def default_data(verify: bool = True) -> DataRoot:
    """The data root of a call given none: ``$BENCHHARNESS_DATA``, else ``./data``. Below the entry
    points no configuration file is read: a run passes its own data root down."""
    return DataRoot(default_data_dir(), verify)


#: how results name the data root: a machine's own path never goes into a committed file; the
#: files (relative to the root) and their sha256 identify the data
DATA_ROOT_LABEL = "$BENCHHARNESS_DATA"


class DataRoot:
    """A folder laid out like ``../shared/data``: ``senteval/``, ``glove/``, ``askubuntu/``, ..."""

    def __init__(self, root: str | Path, verify: bool = True) -> None:
        self.root = Path(root).expanduser()
        self.verify = verify

    def path(self, rel: str, source: str) -> Path:
        """The path of ``rel`` under the root, checked for presence and (if pinned) integrity."""
        p = self.root / rel
        if not self.root.is_dir():
            raise DataError(
                f"the data root {self.root.absolute()} does not exist: point --data-dir, ${ENV_VAR} or [paths] "
                "data_dir of benchharness.toml at the evaluation data, or fetch it there with `benchharness data "
                "download`"
            )
        if not p.exists():
            src = SOURCES[source]
            raise DataError(
                f"missing data file {p}\n  dataset: {src.note}\n  get it with `benchharness data download "
                f"{source}` (source: {src.url}) or point --data-dir / ${ENV_VAR} at a folder that has "
                f"{src.folder}/"
            )
        expected = CHECKSUMS.get(rel)
        if self.verify and expected is not None:
            actual = file_sha256(p)
            if actual != expected:
                raise DataError(
                    f"corrupt or modified data file {p}: sha256 {actual[:16]}... expected {expected[:16]}...; "
                    f"re-download it with `benchharness data download {source}` (or pass --no-verify "
                    "to evaluate on it anyway; results record the actual digest)"
                )
        return p

    def pinned(self, path: Path) -> bool:
        """Whether ``path`` is a file of the root with a known sha256 (``data_checksums.json``)."""
        return path.is_relative_to(self.root) and str(path.relative_to(self.root)) in CHECKSUMS

    def verified(self, files: list[Path]) -> bool:
        """Whether every one of ``files`` was checked against its known sha256: checking is on and
        each is pinned. A file nobody pinned (a probing file, a task's own file) is read as it is,
        and a result computed from it says so (``verified: false``); its digest still names it."""
        return self.verify and all(self.pinned(f) for f in files)

    def digest(self, files: list[Path]) -> str:
        """One sha256 over the (relative name, sha256) of every file a task read."""
        h = hashlib.sha256()
        for f in sorted(files):
            h.update(f"{self.label(f)}:{file_sha256(f)}\n".encode())
        return h.hexdigest()

    def label(self, path: Path) -> str:
        """How results name a file they were computed on: relative to the root, else by its name
        alone (a task file may live anywhere; its sha256 pins it, and no machine path is stored)."""
        return str(path.relative_to(self.root)) if path.is_relative_to(self.root) else path.name

    def status(self) -> list[dict[str, str]]:
        """One row per pinned file and per known dataset folder: present, ok, corrupt or missing."""
        rows = []
        for rel, expected in sorted(CHECKSUMS.items()):
            p = self.root / rel
            if not p.exists():
                state = "missing"
            else:
                state = "ok" if file_sha256(p) == expected else "CORRUPT"
            rows.append({"file": rel, "state": state})
        for name in (
            "askubuntu/text_tokenized.txt.gz",
            "qqp/quora_duplicate_questions.tsv",
            "nli/nli_for_simcse.csv",
            "nltk_data/corpora/wordnet",
            "nltk_data/corpora/stopwords",
            *(f"probing/{f}" for f in PROBING_FILES),
            *(f"senteval/SNLI/{kind}.train" for kind in ("s1", "s2", "labels")),
        ):
            rows.append({"file": name, "state": "present" if (self.root / name).exists() else "missing"})
        return rows


def download(name: str, root: Path) -> Path:
    """Fetch one dataset from its documented source into ``root`` (for users who are online).

    A failed download (offline, a moved URL, a damaged archive) raises ``DataError`` naming the
    URL and what to do, and removes the dataset folder if this call created it: an empty folder
    left behind would look like a download that happened.
    """
    if name not in SOURCES:
        raise DataError(f"unknown dataset {name!r}; known: {', '.join(SOURCES)}")
    src = SOURCES[name]
    target = root / src.folder
    created = not target.exists()
    url = src.url
    try:
        target.mkdir(parents=True, exist_ok=True)
        if name == "nltk":
            import nltk

            for pkg in ("wordnet", "stopwords"):
                url = f"nltk.download({pkg!r})"
                if not nltk.download(pkg, download_dir=str(target), quiet=True, raise_on_error=True):
                    raise OSError(f"NLTK could not fetch {pkg!r}")
            return target
        if name == "probing":
            base = "https://raw.githubusercontent.com/facebookresearch/SentEval/main/data/probing/"
            for f in PROBING_FILES:
                url = base + f
                fetch(url, target / f)
            return target
        if name == "askubuntu":
            base = "https://raw.githubusercontent.com/taolei87/askubuntu/master/"
            for f in ("text_tokenized.txt.gz", "dev.txt", "test.txt"):
                url = base + f
                fetch(url, target / f)
            return target
        with tempfile.TemporaryDirectory() as tmp:
            archive = Path(tmp) / src.url.rsplit("/", 1)[-1]
            fetch(src.url, archive)
            if archive.suffix == ".tar":
                with tarfile.open(archive) as tar:
                    tar.extractall(tmp, filter="data")
                downstream = next(Path(tmp).rglob("downstream"), None) or Path(tmp)
                shutil.copytree(downstream, target, dirs_exist_ok=True)
            elif archive.suffix == ".zip":
                with zipfile.ZipFile(archive) as zf:
                    zf.extractall(target)
            else:
                shutil.move(str(archive), target / archive.name)
        return target
    except (OSError, ValueError, tarfile.TarError, zipfile.BadZipFile) as exc:  # URLError is an OSError
        if created:
            shutil.rmtree(target, ignore_errors=True)
        reason = getattr(exc, "reason", None) or exc
        raise DataError(
            f"could not download {name} from {url}: {reason}\n  check the network connection (or proxy), or "
            f"fetch it by hand and unpack it into {target} ({src.note}); `benchharness data status` shows what is "
            "present"
        ) from None


def save_response(response: BinaryIO, dest: Path) -> Path:
    """Stream an open download (an HTTP response, or anything with ``read``) into ``dest``, atomically:
    a failed or killed download leaves no partial file that would pass for the whole. The one
    writer of downloads: datasets here, published archives in ``encoders.download``."""
    with atomic_file(dest) as out:
        shutil.copyfileobj(response, out, CHUNK)
    return dest


def fetch(url: str, dest: Path) -> Path:
    """Download ``url`` into ``dest`` (see :func:`save_response`)."""
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as resp:
        return save_response(resp, dest)
