"""Reading a model's reply back into a message: a response template derived from a chat template, and the parser that reads with it."""

from .derive import ResponseTemplateError, response_template
from .parse import ResponseStream, parse_response

__all__ = ["ResponseStream", "ResponseTemplateError", "parse_response", "response_template"]
