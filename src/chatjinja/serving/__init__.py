"""Reading a model's reply back into a message: a response template derived from a chat template, and the parser that reads with it.

The package itself imports nothing, so ``chatjinja rules`` can list the RP codes (``serving/rules.py``)
without loading the runtime: ``derive.response_template``, ``parse.parse_response`` and
``parse.ResponseStream`` are exported from ``chatjinja``.
"""
