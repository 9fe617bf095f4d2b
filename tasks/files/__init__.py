"""Tasks declared from files (``[tasks.*]`` of ``benchharness.toml``, or ``register_file_task``): a
researcher's own sentence pairs (``pairs``), labelled sentences (``labels``), BEIR folders and
reranking lists (``ranking``, read by ``beir``), on the shared base (``base``), declared and named
by the ``files`` plugin (``declarations``). See ``declarations`` for the formats and rules.
"""
