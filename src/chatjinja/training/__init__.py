"""Training data: token ids and assistant masks of rendered chats, as transformers 5.25.0 computes them."""
