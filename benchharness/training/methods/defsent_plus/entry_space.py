"""DefSent+ entry embeddings: the frozen vector space definitions are projected into.

An entry's vector is the mean, over its definitions, of the encoder's own embedding of each
definition (paper eq. 2): AC averages the last-layer [CLS] state, AMP averages the masked mean of
the last layer (special tokens included, as the official ``GenerateEntryEmbeddings.py`` does: its
mean runs over every attended token). The encoder runs in eval mode (no dropout), as there.

Definitions are encoded once each in length-sorted batches and then averaged per entry, which
gives the official per-entry computation's numbers (it pads an entry's definitions to their own
longest one under an attention mask) at a fraction of the cost.

The ICA candidate space (paper eq. 11, Appendix A; official ``ICA-transform.py``) standardises the
matrix, runs scikit-learn's FastICA with every component kept, and scales the result by 100
because ICA outputs have unit variance, about 1% of the original scale.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from benchharness.core.devices import autocast
from benchharness.core.encoder import length_sorted_batches
from benchharness.core.errors import InvalidInputError
from benchharness.core.progress import shown
from benchharness.encoders.pooling import masked_mean
from benchharness.training.methods.defsent_plus.dictionary import Dictionary

ENTRY_TYPES = ("ac", "amp")


def average_by_entry(vectors: torch.Tensor, labels: Sequence[int], n_entries: int) -> torch.Tensor:
    """Row ``e`` = mean of the ``vectors`` whose label is ``e``; every entry must have one."""
    labels_t = torch.as_tensor(labels, dtype=torch.long)
    sums = torch.zeros(n_entries, vectors.shape[1], dtype=torch.float64).index_add_(0, labels_t, vectors.double())
    counts = torch.bincount(labels_t, minlength=n_entries)
    if (counts == 0).any():
        raise InvalidInputError(f"{int((counts == 0).sum())} entries have no definition")
    return (sums / counts.unsqueeze(1)).float()


@torch.no_grad()
def entry_embeddings(
    encoder: torch.nn.Module,
    tokenizer,
    dictionary: Dictionary,
    entry_type: str,
    max_length: int,
    batch_size: int = 128,
    device: torch.device | None = None,
    precision: str = "fp32",
    main_process: bool = True,
) -> torch.Tensor:
    """The (entries x hidden) AC or AMP matrix of ``dictionary`` under ``encoder``: one float32 row
    per definition, last-layer [CLS] (``ac``) or masked mean (``amp``), averaged per entry; a
    progress bar where progress is shown and this is the main process (one bar for a data-parallel run)."""
    if entry_type not in ENTRY_TYPES:
        raise InvalidInputError(f"unknown entry type {entry_type!r}; choose one of {', '.join(ENTRY_TYPES)}")
    texts, labels = dictionary.pairs()
    device = device or next(encoder.parameters()).device
    was_training = encoder.training
    encoder.eval()
    out: torch.Tensor | None = None
    batches = list(length_sorted_batches([len(t) for t in texts], batch_size))
    try:
        for idx in tqdm(
            batches,
            desc=f"entry embeddings ({entry_type.upper()})",
            unit="batch",
            disable=not (shown() and main_process),
            dynamic_ncols=True,
        ):
            enc = tokenizer(
                [texts[i] for i in idx], padding=True, truncation=True, max_length=max_length, return_tensors="pt"
            ).to(device)
            with autocast(device, precision):
                last = encoder(**enc).last_hidden_state
            vecs = last[:, 0].float() if entry_type == "ac" else masked_mean(last, enc["attention_mask"])
            if out is None:
                out = torch.empty(len(texts), vecs.shape[1], dtype=torch.float32)
            out[torch.as_tensor(idx)] = vecs.cpu()
    finally:
        encoder.train(was_training)
    if out is None:
        raise InvalidInputError("no definitions to encode")
    return average_by_entry(out, labels, len(dictionary))


def ica_transform(
    matrix: np.ndarray | torch.Tensor, max_iter: int = 1000, seed: int = 42, scale: float = 100.0
) -> np.ndarray:
    """StandardScaler -> FastICA(all components, max_iter, tol 1e-4, unit-variance whitening,
    logcosh, random_state=seed) -> x ``scale``, as the official ``ICA-transform.py``."""
    from sklearn.decomposition import FastICA
    from sklearn.preprocessing import StandardScaler

    x = np.asarray(matrix, dtype=np.float64)
    if x.shape[0] < x.shape[1]:
        raise InvalidInputError(
            f"the ICA space keeps all {x.shape[1]} dimensions and needs at least as many entries; "
            f"this dictionary has {x.shape[0]}"
        )
    scaled = StandardScaler().fit_transform(x)
    ica = FastICA(
        n_components=x.shape[1], max_iter=max_iter, tol=1e-4, whiten="unit-variance", fun="logcosh", random_state=seed
    )
    return (ica.fit_transform(scaled) * scale).astype(np.float32)


def project_2d(matrix: np.ndarray | torch.Tensor) -> dict[str, np.ndarray]:
    """The two views of the paper's figures: ``svd`` (the non-centred matrix on its top-2 right
    singular vectors, Figure 1) and ``pca_whiten`` (centred, top-2 components scaled to unit
    variance, Figure 2)."""
    from sklearn.decomposition import PCA

    x = np.asarray(matrix, dtype=np.float64)
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    return {"svd": x @ vt[:2].T, "pca_whiten": PCA(n_components=2, whiten=True, random_state=0).fit_transform(x)}


def plot_entry_space(matrix: np.ndarray | torch.Tensor, title: str, max_points: int = 50000, seed: int = 0) -> bytes:
    """A PNG with the 2-d SVD and whitened-PCA views of an entry space (paper Figures 1-3).

    Projections use every entry; at most ``max_points`` (a seeded sample) are drawn, which keeps
    the file small without changing the picture."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    views = project_2d(matrix)
    n = len(views["svd"])
    show = np.sort(np.random.default_rng(seed).choice(n, max_points, replace=False)) if n > max_points else slice(None)
    fig, axes = plt.subplots(1, 2, figsize=(9, 4.2))
    for ax, (key, label) in zip(axes, (("svd", "2-d SVD (non-centred)"), ("pca_whiten", "PCA, whitened"))):
        pts = views[key][show]
        size, alpha = (1, 0.25) if len(pts) > 10000 else (4, 0.6)  # small dictionaries stay visible
        ax.scatter(pts[:, 0], pts[:, 1], s=size, alpha=alpha, linewidths=0, rasterized=True)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("axis 1")
        ax.set_ylabel("axis 2")
    fig.suptitle(f"{title} ({n} entries)", fontsize=11)
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=90)
    plt.close(fig)
    return png.getvalue()
