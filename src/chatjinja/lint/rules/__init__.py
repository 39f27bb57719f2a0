"""One module per lint rule; each defines ``RULE`` (see ``chatjinja.lint.registry`` for the table)."""
