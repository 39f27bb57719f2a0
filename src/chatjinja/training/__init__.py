"""Training data: token ids, assistant masks and the ``{% generation %}`` tags they are computed from."""
