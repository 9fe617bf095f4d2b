"""The leaderboard's tables of the built-in tasks, declared here once: each task names its table in
its metadata (``TaskMetadata.board``), and the leaderboard is built from those, so a task of a
plugin places itself the same way (or, naming none, gets a table of its family's)."""

from __future__ import annotations

from benchharness.core.task import BoardSection

#: the seven STS test sets the papers report, averaged as they average them
STS = BoardSection("STS (Spearman x100; STS12-16 'all' aggregation)", order=10, average=True, published_csv="sts.csv")
#: SentEval's seven transfer tasks the papers report, their accuracies averaged
TRANSFER = BoardSection("SentEval transfer (test accuracy %)", order=20, average=True, published_csv="transfer.csv")
#: PaSeR's retrieval and reranking columns: two metrics per task, hence no average
RANKING = BoardSection("Retrieval and reranking (x100)", order=30, published_csv="ranking.csv")
#: SentEval's other tasks: metrics differ between columns (accuracy, Pearson), hence no average
SENTEVAL_FURTHER = BoardSection(
    "SentEval, further tasks (test accuracy %; SICK-R and STS-B supervised: test Pearson x100)", order=40
)
#: the ten probing tasks: probes of different properties, no average
PROBING = BoardSection("SentEval probing (test accuracy %)", order=50)
#: a researcher's own tasks declared from files (``tasks.files``): unrelated tasks, no average
FILES = BoardSection("Tasks from files (main score x100)", order=70)
