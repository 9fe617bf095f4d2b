"""Tiny tasks and a role-aware fake encoder for the round trips of vectors computed elsewhere
(``benchharness sentences`` then ``vectors:DIR``): no data files, every score a pure function of
the vectors, so that served rows identical to the fake's give scores identical to its own."""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr

from benchharness.core.prompts import DEFAULT, DOCUMENT, Role
from benchharness.core.task import Task, TaskMetadata, TaskProvider
from benchharness.scoring.metrics import paired_cosine
from tests.fakes import HashEncoder


def role_of(line: dict) -> Role:
    """The role a line of ``sentences.jsonl`` asks for, as a user's encoding script reads it."""
    name = line["role"]
    return Role(name, line.get("instruction")) if name != "default" else DEFAULT


PAIRS = [
    ("a man plays a guitar", "a man is playing the guitar", 4.8),
    ("a woman slices an onion", "someone cuts an onion", 4.2),
    ("two dogs run in a field", "a cat sleeps on a sofa", 0.4),
    ("a child reads a book", "a kid is reading", 4.0),
    ("the stock market fell", "a man plays a guitar", 0.0),
    ("it rains in paris", "the weather in paris is wet", 3.1),
]
QUERIES = ["how do i install a package", "why is my disk full", "a man plays a guitar"]
#: document i answers query i; the last query's text is also a document (its role differs)
DOCUMENTS = [
    "install a package with apt",
    "find what fills the disk",
    "guitar lessons for a man",
    "a man plays a guitar",
    "an unrelated title",
]


class PairTask(Task):
    """STS-like: Spearman of the pairs' cosines with the gold scores (x100)."""

    metadata = TaskMetadata(
        name="VecPairs",
        family="test",
        description="pairs",
        split="test",
        main_score="spearman",
        protocol="none",
        reference="",
    )

    def _load(self, data):
        pass

    def sentences(self):
        return [s for a, b, _ in PAIRS for s in (a, b)]

    def evaluate(self, embed, seed):
        cosines = paired_cosine(embed([a for a, _, _ in PAIRS]), embed([b for _, b, _ in PAIRS]))
        return {
            "spearman": 100 * float(spearmanr(cosines, [g for _, _, g in PAIRS]).statistic),
            "cosine_sum": float(np.sum(cosines)),
        }


class SearchTask(Task):
    """Retrieval-like: queries against documents by role; MRR of document i for query i (x100)."""

    metadata = TaskMetadata(
        name="VecSearch",
        family="test",
        description="search",
        split="test",
        main_score="mrr",
        protocol="none",
        reference="",
        instruction="Find the answer",
    )

    def _load(self, data):
        pass

    def sentences(self):
        return QUERIES + DOCUMENTS

    def requests(self):
        return {self.query_role: QUERIES, DOCUMENT: DOCUMENTS}

    def evaluate(self, embed, seed):
        q, d = embed(QUERIES, self.query_role), embed(DOCUMENTS, DOCUMENT)
        sims = (q / np.linalg.norm(q, axis=1, keepdims=True)) @ (d / np.linalg.norm(d, axis=1, keepdims=True)).T
        ranks = [1 + int(np.sum(sims[i] > sims[i, i])) for i in range(len(QUERIES))]
        return {"mrr": 100 * float(np.mean([1 / r for r in ranks])), "sim_sum": float(sims.sum())}


PROVIDER = TaskProvider(tasks={"VecPairs": PairTask, "VecSearch": SearchTask})


class RoleHashEncoder(HashEncoder):
    """A role-aware fake: other vectors for every role and instruction (salted by them)."""

    role_aware = True

    def encode_role(self, sentences, role: Role = DEFAULT):
        self.calls.append(list(sentences))
        return HashEncoder(dim=self.dim, salt=f"{role}|{role.instruction}").encode(sentences)

    def identity_info(self):
        return {"family": "role-hash", "dim": self.dim}
