"""Layer 1, contracts and plumbing: the encoder, task and result contracts, the plugin registry,
encoder specs and run manifests, settings (``benchharness.toml``), the data root and its pinned
checksums, and the small jobs every layer shares (atomic writes, seeding, provenance, devices,
digests, resource use, errors). Imports nothing else of the package."""
