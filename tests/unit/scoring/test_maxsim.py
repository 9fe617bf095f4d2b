"""MaxSim scoring and search (``benchharness.scoring.maxsim``) against a brute-force numpy MaxSim
written here from the definition, and against sentence-transformers' own ``maxsim`` /
``maxsim_pairwise`` (the functions ``MultiVectorInformationRetrievalEvaluator`` scores with) on
ragged inputs with their edge cases: lists do not depend on the block sizes, ties go by corpus
order, and the blocks keep to the memory bound."""

from __future__ import annotations

import numpy as np
import pytest

from benchharness.core.errors import InvalidInputError
from benchharness.core.prompts import DEFAULT, DOCUMENT, QUERY
from benchharness.scoring.maxsim import EMPTY_DOCUMENT, MIB, PROBE, MultiVectorView

DIM = 8


def brute_maxsim(q: np.ndarray, d: np.ndarray, normalise: bool = False) -> float:
    """Sum over query tokens of the best dot product with any document token, in float64 loops."""
    if len(d) == 0:
        total = EMPTY_DOCUMENT
    else:
        total = sum(max(float(np.dot(qt.astype(np.float64), dt)) for dt in d) for qt in q)
    return total / max(len(q), 1) if normalise else total


def random_tokens(rng: np.random.Generator, n: int, low: int = 1, high: int = 12) -> list[np.ndarray]:
    mats = [rng.standard_normal((int(t), DIM)).astype(np.float32) for t in rng.integers(low, high, size=n)]
    return [m / np.linalg.norm(m, axis=1, keepdims=True) for m in mats]


class FakeModel:
    """Token matrices looked up by text and role; records what each call asked for."""

    def __init__(self, table: dict[tuple[str, str], np.ndarray]) -> None:
        self.table = table
        self.calls: list[tuple[str, int, int]] = []  # (role, texts, bytes returned)

    def __call__(self, sentences, role):
        out = [self.table[(str(role), s)] for s in sentences]
        self.calls.append((str(role), len(sentences), sum(m.nbytes for m in out)))
        return out


def corpus_model(rng, n_queries=7, n_docs=60, **sizes):
    queries = [f"q{i}" for i in range(n_queries)]
    docs = [f"d{i}" for i in range(n_docs)]
    table = dict(zip([("query", q) for q in queries], random_tokens(rng, n_queries, **sizes)))
    table.update(zip([("document", d) for d in docs], random_tokens(rng, n_docs, **sizes)))
    return queries, docs, table


def brute_search(table, queries, docs, k, normalise=False, exclude=None):
    """Every score, then a stable sort by score descending: ties keep corpus order."""
    ids, scores = [], []
    for i, q in enumerate(queries):
        s = np.array([brute_maxsim(table[("query", q)], table[("document", d)], normalise) for d in docs])
        if exclude is not None and exclude[i] >= 0:
            s[exclude[i]] = -np.inf
        order = np.argsort(-s, kind="stable")[:k]
        ids.append(order[np.isfinite(s[order])])
        scores.append(s[ids[-1]])
    return scores, ids


@pytest.mark.parametrize("normalise", [False, True])
def test_search_equals_brute_force_maxsim(normalise):
    rng = np.random.default_rng(0)
    queries, docs, table = corpus_model(rng)
    view = MultiVectorView(FakeModel(table), length_normalized=normalise)
    scores, ids = view.search(queries, docs, 5)
    want_s, want_i = brute_search(table, queries, docs, 5, normalise)
    for row in range(len(queries)):
        np.testing.assert_array_equal(ids[row], want_i[row])
        np.testing.assert_allclose(scores[row], want_s[row], rtol=1e-5, atol=1e-5)


def test_pairs_equal_brute_force_and_each_distinct_text_is_encoded_once_per_block():
    rng = np.random.default_rng(1)
    mats = random_tokens(rng, 6)
    table = {("default", f"t{i}"): m for i, m in enumerate(mats)}
    model = FakeModel(table)
    left = ["t0", "t0", "t1", "t2", "t0"]
    right = ["t3", "t4", "t5", "t3", "t3"]
    got = MultiVectorView(model).pairs(left, right, (DEFAULT, DEFAULT))
    want = [brute_maxsim(table[("default", a)], table[("default", b)]) for a, b in zip(left, right)]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert got.dtype == np.float64
    assert [n for _, n, _ in model.calls] == [3, 3]  # t0, t1, t2 then t3, t4, t5


def test_scores_are_sentence_transformers_maxsim_with_its_edge_cases():
    """An empty document ranks below all (ST's -1e9 sentinel), an empty query scores 0, and
    mean-MaxSim divides by the query's token count: as ``maxsim`` / ``maxsim_pairwise`` compute."""
    from sentence_transformers.util.similarity import maxsim, maxsim_pairwise

    rng = np.random.default_rng(2)
    queries = [*random_tokens(rng, 3), np.zeros((0, DIM), np.float32)]
    docs = [*random_tokens(rng, 4), np.zeros((0, DIM), np.float32)]
    table = {("query", f"q{i}"): m for i, m in enumerate(queries)}
    table.update({("document", f"d{i}"): m for i, m in enumerate(docs)})
    names_q, names_d = [f"q{i}" for i in range(4)], [f"d{i}" for i in range(5)]
    for normalise in (False, True):
        view = MultiVectorView(FakeModel(table), length_normalized=normalise)
        scores, ids = view.search(names_q, names_d, 5)
        reference = maxsim(queries, docs, length_normalize=normalise).numpy()
        got = np.full_like(reference, np.nan)
        np.put_along_axis(got, ids, scores, axis=1)
        np.testing.assert_allclose(got, reference, rtol=1e-5, atol=1e-4)
        pairs = view.pairs(names_q * 5, [d for d in names_d for _ in names_q], (QUERY, DOCUMENT))
        ref_pairs = maxsim_pairwise(queries * 5, [d for d in docs for _ in queries], length_normalize=normalise)
        np.testing.assert_allclose(pairs, ref_pairs.numpy(), rtol=1e-5, atol=1e-4)
    assert ids[0, -1] == 4  # the empty document last


def test_lists_do_not_depend_on_the_block_sizes():
    rng = np.random.default_rng(3)
    queries, docs, table = corpus_model(rng, n_docs=300)
    exclude = np.array([5, -1, 40, 299, 0, 7, 100])
    lists, blocks = [], []
    for memory in (64.0, 0.02, 0.0001):  # a probe then one block; blocks of a few documents; of one
        view = MultiVectorView(FakeModel(table), memory_mib=memory)
        lists.append(view.search(queries, docs, 10, exclude=exclude))
        blocks.append(view.blocks)
    assert [len(b) for b in blocks[:1]] == [2] and 10 < len(blocks[1]) < 100 and len(blocks[2]) > 250
    for scores, ids in lists[1:]:  # the same lists; a score may move in its last bit (BLAS kernels)
        np.testing.assert_array_equal(ids, lists[0][1])
        np.testing.assert_allclose(scores, lists[0][0], rtol=1e-6)
    assert not (lists[0][1] == exclude[:, None]).any()
    _, want = brute_search(table, queries, docs, 10, exclude=exclude)
    np.testing.assert_array_equal(lists[0][1], np.array(want))


def test_ties_go_by_corpus_order_across_blocks():
    """Documents with one token vector each, three of them the same: tied scores, whatever block
    each falls in, come in corpus order (the excluded one left out), padding at the end."""
    e = np.eye(DIM, dtype=np.float32)
    query = np.stack([e[0], e[1]])
    vectors = [e[2], e[0], e[3], e[0], e[4], e[1], e[0]]  # scores 0, 1, 0, 1, 0, 1, 1
    table = {("query", "q"): query} | {("document", f"d{i}"): v[None, :] for i, v in enumerate(vectors)}
    docs = [f"d{i}" for i in range(len(vectors))]
    for memory in (1.0, 1e-6):  # one block; one document a block
        view = MultiVectorView(FakeModel(table), memory_mib=memory)
        scores, ids = view.search(["q"], docs, 6)
        assert ids.tolist() == [[1, 3, 5, 6, 0, 2]]
        scores, ids = view.search(["q"], docs, 9, exclude=np.array([3]))
        assert ids.tolist() == [[1, 5, 6, 0, 2, 4, -1, -1, -1]]
        assert scores[0, :3].tolist() == [1.0, 1.0, 1.0] and np.isneginf(scores[0, 6:]).all()


def test_many_documents_tied_at_the_cut_are_kept_in_corpus_order():
    """Fifty documents of three distinct scores: more documents tie at each list's last place than
    the list has room for, and the ones kept are the first in the corpus (a partial sort alone
    keeps an arbitrary few)."""
    rng = np.random.default_rng(6)
    e = np.eye(DIM, dtype=np.float32)
    query = np.stack([e[0], e[1], e[2]])
    picks = rng.integers(0, 3, size=50)
    table = {("query", "q"): query} | {("document", f"d{i}"): (e[: p + 1].sum(0))[None, :] for i, p in enumerate(picks)}
    docs = [f"d{i}" for i in range(50)]
    _, want = brute_search(table, ["q"], docs, 10)
    for memory in (1.0, 0.001):
        _, ids = MultiVectorView(FakeModel(table), memory_mib=memory).search(["q"], docs, 10)
        assert ids[0].tolist() == want[0].tolist()


def test_blocks_keep_to_the_memory_bound():
    """Documents of 10 tokens of 8 floats (320 bytes): after the probe, each block's token vectors
    fit a quarter of the bound, and each encoding call holds one block."""
    rng = np.random.default_rng(4)
    queries, docs, table = corpus_model(rng, n_docs=1000, low=10, high=11)
    memory_mib = 20_000 / MIB  # a quarter: 5,000 bytes, 15 documents
    model = FakeModel(table)
    view = MultiVectorView(model, memory_mib=memory_mib)
    view.search(queries, docs, 3)
    doc_calls = [(n, b) for role, n, b in model.calls if role == "document"]
    assert doc_calls[0][0] == PROBE
    assert all(b <= 5_000 for _, b in doc_calls[1:])
    assert [n for n, _ in doc_calls[1:-1]] == [15] * (len(doc_calls) - 2) and view.blocks[1] == 15
    facts = view.facts()
    assert facts["tokens_per_document"] == 10 and facts["token_dimension"] == DIM
    assert facts["bytes_per_document"] == 4 * 10 * DIM and facts["index_bytes"] == 1000 * 4 * 10 * DIM


def test_a_search_holds_no_more_than_the_bound_whatever_the_corpus():
    """What a search allocates (numpy reports its buffers to tracemalloc) beside the model's own
    outputs: under a 2 MiB bound for a corpus whose token vectors take 20 MiB, at most the bound; in
    one block, the corpus twice over (its matrices and their stacking)."""
    import tracemalloc

    rng = np.random.default_rng(7)
    dim, tokens, n_docs = 64, 20, 4000
    table = {("query", f"q{i}"): rng.standard_normal((8, dim)).astype(np.float32) for i in range(20)}
    table |= {("document", f"d{i}"): rng.standard_normal((tokens, dim)).astype(np.float32) for i in range(n_docs)}
    corpus_mib = n_docs * tokens * dim * 4 / MIB
    peaks = {}
    for memory in (2.0, 4 * corpus_mib):
        view = MultiVectorView(FakeModel(table), memory_mib=memory)
        tracemalloc.start()
        view.search([f"q{i}" for i in range(20)], [f"d{i}" for i in range(n_docs)], 10)
        peaks[memory] = tracemalloc.get_traced_memory()[1] / MIB
        tracemalloc.stop()
    assert corpus_mib > 19 and peaks[2.0] < 2.0 < corpus_mib < peaks[4 * corpus_mib]


def test_facts_are_the_means_over_the_corpus():
    rng = np.random.default_rng(5)
    queries, docs, table = corpus_model(rng, n_docs=50)
    view = MultiVectorView(FakeModel(table))
    assert view.facts() == {}
    view.search(queries, docs, 4)
    tokens = [len(table[("document", d)]) for d in docs]
    facts = view.facts()
    assert facts["index_bytes"] == 4 * DIM * sum(tokens)
    assert facts["bytes_per_document"] == pytest.approx(4 * DIM * np.mean(tokens))
    assert facts["tokens_per_query"] == pytest.approx(np.mean([len(table[("query", q)]) for q in queries]))


def test_a_model_that_gives_no_matrix_per_text_is_refused_in_one_line():
    view = MultiVectorView(lambda sentences, role: [np.zeros(DIM, np.float32) for _ in sentences])
    with pytest.raises(InvalidInputError, match="one \\(tokens x dimension\\) matrix per text"):
        view.search(["q"], ["d"], 1)
    view = MultiVectorView(lambda sentences, role: [])
    with pytest.raises(InvalidInputError, match="gave 0 token matrices for 1 texts"):
        view.pairs(["a"], ["b"])
