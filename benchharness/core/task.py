"""The one contract every task honours: metadata, the sentences it will ask for, and an
evaluation from embeddings (the counterpart of ``benchharness.core.encoder`` for tasks).

It lives in the core so that the runner can drive tasks it is handed without importing the task
package; task families (the ``tasks`` package) implement it. A task never loads a model. The
runner calls ``load`` once (reading files through the data root, which checks them), collects
``sentences()`` from every selected task, encodes the unique ones once, and calls
``evaluate_items(embed)`` where ``embed(list_of_sentences)`` is served from that store.

Roles: an asymmetric task (retrieval, reranking, duplicate-question search) declares what it will
ask for by role in ``requests()`` and calls ``embed(sentences, QUERY)`` / ``embed(..., DOCUMENT)``;
a symmetric one declares ``sentences()`` and calls ``embed(sentences)``.

Per-item outputs: ``evaluate_items`` returns the metrics together with the outputs they
were computed from (a cosine per pair, a prediction per test item, AP/RR per query), so that
confidence intervals and paired comparisons never need the encoder again. A task family that keeps
none implements ``evaluate`` only; the default ``evaluate_items`` then returns no items.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from benchharness.core.data_root import DataRoot
from benchharness.core.kinds import VECTORS, ViewSettings
from benchharness.core.prompts import DEFAULT, QUERY, Role

if TYPE_CHECKING:  # the contract needs no numpy at run time (the leaderboard reads results without it)
    import numpy as np

    from benchharness.core.encoder import Encoder


class Embed(Protocol):
    """What a task gets to embed sentences: one float32 row per sentence, in order, for ``role``."""

    def __call__(self, sentences: list[str], role: Role = DEFAULT, /) -> np.ndarray: ...


#: what ``evaluate`` returns: scores (x100) and counts by metric name, plus descriptive strings
#: (a transfer task's classifier ``config``); the keys differ from task family to task family
Metrics = dict[str, float | int | str]
#: per-item outputs by array name; which names a family uses is told by ``Evaluation.kind``
Items = dict[str, "np.ndarray"]
#: the kinds of per-item outputs, each read by ``benchharness.scoring.confidence``
ITEM_KINDS = ("sts", "classification", "ranking")


class DataRecord(TypedDict):
    """Which bytes the task read: one digest over every file, the data root and the files (a
    result's ``data`` entry; here, beside the tasks that give it, as ``core.results`` imports this module)."""

    sha256: str
    root: str
    files: list[str]
    verified: bool


@dataclass
class Evaluation:
    """Metrics and the per-item outputs they were computed from.

    ``kind`` says how to read ``items``: ``sts`` (``cosine``, ``gold``, ``subset`` index into
    ``subset_names``), ``classification`` (``pred``, ``gold``, and ``fold`` for outer k-fold tasks,
    whose score is the mean of the per-fold accuracies), ``ranking`` (one array per metric key, the
    per-query value whose mean x100 is that metric). An empty ``items`` means none were kept.
    """

    metrics: Metrics
    items: Items = field(default_factory=dict)
    kind: str = ""
    #: the text put in front of each side's sentences, by side, when the task chose it (an mteb task
    #: gives its instruction as mteb does); None: the runner records the encoder's prompts by role
    prompts: dict[str, str] | None = None


@dataclass(frozen=True)
class BoardSection:
    """A table of the leaderboard, declared by the tasks that are its columns (``TaskMetadata.board``):
    the tables are built from the installed tasks' metadata, so a task from a plugin gets its column
    without the reporting code knowing it. Sections are shown by ``order``, columns in the task
    catalogue's order."""

    title: str
    order: int = 100
    #: whether a row's mean over the columns means anything (one metric of one kind of task)
    average: bool = False
    #: the papers' numbers for this table, a CSV among ``benchharness/reporting/published/``
    published_csv: str | None = None


@dataclass(frozen=True)
class BoardColumn:
    """One column a task gives its section: a header (None: the task's name), a metric (None: the
    task's main score) and the column of the section's published CSV holding the papers' numbers."""

    header: str | None = None
    metric: str | None = None
    published: str | None = None


@dataclass(frozen=True)
class TaskMetadata:
    name: str
    family: str
    description: str
    split: str
    main_score: str  # key into the metrics dict
    protocol: str  # variant name, recorded in every result
    reference: str
    groups: tuple[str, ...] = ()
    n_samples: int | None = None  # expected evaluation items, checked at load
    #: given to the query side of a model that takes instructions (``[tasks.x] instruction = "..."``)
    instruction: str | None = None
    protocol_details: dict[str, Any] = field(default_factory=dict)
    #: the leaderboard table this task is a column of; None: a table of its family's own
    #: (``family_board``); a task that only varies one on the board (a dev split, a fast protocol)
    #: sets ``on_board=False`` instead
    board: BoardSection | None = None
    board_columns: tuple[BoardColumn, ...] = (BoardColumn(),)
    on_board: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def family_board(family: str) -> BoardSection:
    """The leaderboard table of the tasks of ``family`` that name none: their main scores, no average
    (tasks of one family may still score different metrics)."""
    return BoardSection(f"{family} tasks (main score x100)")


class Task(ABC):
    metadata: TaskMetadata
    #: the operations its evaluation uses (``core.kinds``: vectors, pairs, search); a model of a kind
    #: that does not offer them all is refused before anything is encoded. ``embed`` is then a
    #: ``core.kinds.View`` of that model (a task reads it through ``scoring.views.as_view``)
    takes: frozenset[str] = frozenset({VECTORS})

    def __init__(self) -> None:
        self.files: list[Path] = []
        self.loaded = False

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def declared(self) -> TaskMetadata:
        """The metadata as declared, before any data is read: what the leaderboard places a task by.
        ``metadata`` itself, but for a task that completes its metadata from its data."""
        return self.metadata

    def load(self, data: DataRoot) -> None:
        """Read the task's files (once); ``self.files`` lists every file read, for checksums."""
        if not self.loaded:
            self._load(data)
            self.loaded = True

    def _path(self, data: DataRoot, rel: str, source: str) -> Path:
        path = data.path(rel, source)
        self.files.append(path)
        return path

    @abstractmethod
    def _load(self, data: DataRoot) -> None: ...

    @abstractmethod
    def sentences(self) -> list[str]:
        """Every sentence ``evaluate`` will ask to embed (in any role)."""

    def requests(self) -> dict[Role, list[str]]:
        """Every sentence ``evaluate`` will ask to embed, by the role it asks for it in; a symmetric
        task asks for all of ``sentences()`` in the default role."""
        return {DEFAULT: self.sentences()}

    @property
    def query_role(self) -> Role:
        """The role of this task's queries: carries the task's instruction, if it has one."""
        return Role(QUERY.name, self.metadata.instruction)

    @abstractmethod
    def evaluate(self, embed: Embed, seed: int) -> Metrics:
        """Metrics (scores x100), including ``metadata.main_score``."""

    def evaluate_items(self, embed: Embed, seed: int) -> Evaluation:
        """Metrics with per-item outputs; families that keep items override this and define
        ``evaluate`` as its metrics, so that both come from one computation."""
        return Evaluation(self.evaluate(embed, seed))


class EncoderDrivenTask(Task):
    """A task that drives encoding itself: mteb's evaluators decide what to encode and when (a
    retrieval corpus, per-split batches), so such a task is handed the encoder, not an embedding
    store. The runner still gives it the encoder the resolver built (with benchharness's embedding
    cache around it), records its result like any other, and contains its failures.

    Its data are not files under the data root: ``data_record`` says what pins them instead (for
    mteb, a Hugging Face dataset at a revision, also written into the protocol).
    """

    def sentences(self) -> list[str]:
        return []  # nothing for the shared encoding pass: the task encodes through the encoder

    def evaluate(self, embed: Embed, seed: int) -> Metrics:
        raise TypeError(f"{self.name} drives encoding itself: call evaluate_encoder(encoder, seed)")

    @abstractmethod
    def evaluate_encoder(
        self, encoder: Encoder, seed: int, settings: ViewSettings | None = None
    ) -> Metrics | Evaluation:
        """Metrics (scores x100), including ``metadata.main_score``; or an ``Evaluation`` of them that
        also says which prompt each side's sentences got (``Evaluation.prompts``). ``settings`` are the
        run's for a model of a kind other than dense: where its kind caches its outputs, and the memory
        a corpus block may take (``core.kinds.ViewSettings``)."""

    @abstractmethod
    def data_record(self) -> DataRecord:
        """The result's ``data`` entry: ``sha256`` (empty when the data are not read as files
        here), ``root``, ``files`` (names that locate the data) and ``verified``."""


@dataclass(frozen=True)
class TaskProvider:
    """What a ``tasks`` plugin contributes: tasks by name, groups of them, other spellings, and
    optionally a prefix under which it builds tasks from any name (``mteb:<TaskName>``).

    Factories build a task without reading data (``Task.load`` reads it), so listing is cheap.
    """

    tasks: dict[str, Callable[[], Task]] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    prefix: str | None = None
    #: builds a task for a name that starts with ``prefix`` (the name is passed whole)
    build_prefixed: Callable[[str], Task] | None = None
    #: the task names a prefixed name stands for (a benchmark: several), each one that
    #: ``build_prefixed`` builds; None: the name itself
    expand_prefixed: Callable[[str], list[str]] | None = None
    #: how the prefix is written, for help and error texts (``mteb:<TaskName>``)
    prefix_usage: str = ""
    #: providers are listed and searched in increasing order
    order: int = 100
    #: names declared to this provider but refused, with why (a table of the configuration with a
    #: bad key): asking for one says so, instead of "unknown task"
    refused: dict[str, str] = field(default_factory=dict)
    #: the groups whose unweighted mean over their tasks' main scores is a score of its own (NanoBEIR's
    #: mean nDCG@10): results, the leaderboard and the training evaluators report it, with an interval
    #: resampled within each task (``benchharness.scoring.confidence.mean_over_tasks``)
    means: tuple[str, ...] = ()
