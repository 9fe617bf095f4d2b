"""Vectors computed elsewhere: the ``vectors`` family, ``vectors:<folder>`` or ``vectors:<file>``.

A model that cannot run inside the harness (a proprietary API, another framework, a cluster job)
is still evaluated by the harness's own protocols: ``benchharness sentences --tasks ... --out DIR``
writes every sentence the tasks will ask for to ``DIR/sentences.jsonl``, the user encodes those
lines wherever the model runs and saves ``DIR/vectors.npy`` (one row per line, same order), and
``vectors:DIR`` then serves those rows to the runner like any encoder. This module holds both
sides of that format, so that what ``sentences`` writes is exactly what the encoder reads.

Three layouts:

- a folder with ``sentences.jsonl`` (``{"text", "role"[, "instruction"]}`` per line) and
  ``vectors.npy`` (``(lines, d)``, any float dtype; only the rows asked for are read, a block at a
  time, so a corpus larger than memory works);
- a ``.jsonl`` file whose lines carry their vector (``{"text", "vector": [...], "role"?}``);
- a ``.parquet`` file with columns ``text``, ``vector`` (a list of floats), optional ``role`` and
  ``instruction`` (needs pyarrow).

A sentence is keyed by its text, its role and, for a query, the task's instruction (an
instruction-following model gives other vectors under another instruction). A file that holds
only the default role answers every role with those rows (the vectors of a symmetric model); a
file with query or document rows makes the encoder role-aware, so the runner asks for each role
separately, and a role is answered only by its own rows. A sentence without a row is never
replaced by anything: the request fails, naming what is missing, and no task is scored from a
partial set.

A folder may instead hold a sparse model's rows (``vectors.npz``, a scipy.sparse matrix of one row
per line) or a multi-vector model's token vectors (``tokens.npy``, every line's stacked, with
``token_offsets.npy``, where each line's start), and optionally ``similarity.json``: the encoder is
then a model of that kind (``core.kind_models``), scored through its kind's view; its files say its
kind, and a folder with two kinds' files is refused. The keyed files hold dense rows only.

The format's names are in ``layout``, the writing side (what ``benchharness sentences`` writes) in
``writer``, the dense layouts' readers in ``readers``, the other kinds' in ``kind_readers``, what
every encoder of the family shares in ``served``, the other kinds' encoders in ``kind_encoders``
and the ``vectors`` family in ``encoder``.
"""
