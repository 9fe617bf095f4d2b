"""``benchharness train <method>``: one module per method with ``HELP``, ``add_arguments(parser)``
and ``main(args, dev=None) -> int``, turning flags and presets into a method, its data and a call
of the shared loop. The methods themselves (model, loss, presets) live in ``encoders.methods``.
"""
