"""SentEval's tasks, with its protocols: the seven transfer tasks (``transfer``), SST5 and
SICK-E (``split``), SNLI (``snli``), supervised SICK-R and STS-B (``relatedness``) and the ten
probing tasks (``probing``); their shared base (``base``), classifier settings (``config``), the
classifiers (``classifier``, ``mlp``), and the plugin that names them all (``provider``).

SentEval's unsupervised STS tasks are ``benchharness.tasks.sts``: they share no code with these.
"""
