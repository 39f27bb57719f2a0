"""The provenance render prints what the plain render prints, where a message's string meets a Markup string."""

from __future__ import annotations

from chatjinja.observation import render_text

# ``x|tojson|safe`` is Markup; a plain string added to it is escaped first (markupsafe's ``__radd__``), a message's
# string too (mistral-common's v2 template prints its tool calls this way)
TEMPLATE = "{% for m in messages %}{{ m['content'] + ({'k': 1}|tojson|safe) }}{% endfor %}"


def test_a_message_string_added_to_markup_is_escaped_as_in_the_plain_render() -> None:
    messages = [{"role": "user", "content": '"quoted" <b>'}]
    plain = render_text(TEMPLATE, messages)
    traced = render_text(TEMPLATE, messages, traced=True)
    assert plain.text == "&#34;quoted&#34; &lt;b&gt;{\"k\": 1}"
    assert traced.text == plain.text
