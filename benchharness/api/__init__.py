"""Layer 6, the Python API: ``evaluate`` any model object on any task, and evaluators that run the
harness's protocols inside a training loop."""
