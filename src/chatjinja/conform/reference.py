"""mistral-common as the ground truth: its bundled tokenizers (v1–v7) or the Jinja template it generates (v11+)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from ..errors import ChatJinjaError
from ..runtime.render import render_source

__all__ = [
    "MISTRAL_COMMON_VERSION",
    "Reference",
    "ReferenceOutcome",
    "ReferenceUnavailable",
    "UnknownReference",
    "VERSIONS",
    "has_images",
    "load_reference",
    "parse_against",
]

MISTRAL_COMMON_VERSION = "1.13.1"
INSTALL_HINT = "pip install 'chatjinja[mistral]' (mistral-common[sentencepiece]==1.13.1)"

# version -> (tokenizer factory arguments or None when mistral-common bundles no tokenizer file, supports images)
VERSIONS: dict[str, dict[str, Any]] = {
    "v1": {"factory": ("v1", {}), "images": False, "spm": True},
    "v2": {"factory": ("v2", {}), "images": False, "spm": True},
    "v3": {"factory": ("v3", {}), "images": False, "spm": True},
    "v3-tekken": {"factory": ("v3", {"is_tekken": True}), "mm_factory": ("v3", {"is_tekken": True, "is_mm": True}), "images": True, "spm": False},
    "v7": {"factory": ("v7", {}), "mm_factory": ("v7", {"is_mm": True}), "images": True, "spm": True},
    "v11": {"factory": None, "images": True, "spm": False},
    "v13": {"factory": None, "images": True, "spm": False},
    "v15": {"factory": None, "images": True, "spm": False},
}
_ALIASES = {"v2/v3": "v3", "v2-v3": "v3", "v3tekken": "v3-tekken", "v3_tekken": "v3-tekken", "tekken": "v3-tekken"}
_IMAGE_TOKENS = ("[IMG]", "[IMG_BREAK]", "[IMG_END]")


class ReferenceUnavailable(ChatJinjaError, ImportError):
    """mistral-common (the ``[mistral]`` extra) is not installed, so there is no reference to compare with."""


class UnknownReference(ChatJinjaError, ValueError):
    """The reference asked for does not exist (unknown package, version or form)."""


def parse_against(against: str) -> str:
    """``mistral-common:v3-tekken``, ``mistral-common==1.13.1:v3`` or a bare ``v3`` -> the version key ``v3``."""
    text = against.strip()
    if ":" in text:
        package, _, text = text.partition(":")
        package_name = re.split(r"[=<>!~ ]", package.strip(), maxsplit=1)[0].replace("_", "-").lower()
        if package_name != "mistral-common":
            raise UnknownReference(f"unknown reference {package!r}: only mistral-common:VERSION is supported")
    key = text.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in VERSIONS:
        raise UnknownReference(f"unknown mistral-common tokenizer version {text!r} (known: {', '.join(VERSIONS)})")
    return key


@functools.cache
def _mistral_common() -> SimpleNamespace:
    """The mistral-common names the reference uses; :class:`ReferenceUnavailable` when it is not installed."""
    try:
        import mistral_common.exceptions, mistral_common.integrations.chat_templates.template_generator, mistral_common.protocol.instruct.request, mistral_common.protocol.instruct.validator, mistral_common.tokens.tokenizers.base, mistral_common.tokens.tokenizers.mistral  # lazy: the [mistral] extra is optional  # noqa: E401, E501
    except ImportError:
        raise ReferenceUnavailable(f"mistral-common is not installed: {INSTALL_HINT}") from None
    base, instruct = mistral_common.tokens.tokenizers.base, mistral_common.protocol.instruct
    return SimpleNamespace(
        MistralCommonException=mistral_common.exceptions.MistralCommonException,
        TemplateConfig=mistral_common.integrations.chat_templates.template_generator.TemplateConfig,
        build_chat_template=mistral_common.integrations.chat_templates.template_generator.build_chat_template,
        ChatCompletionRequest=instruct.request.ChatCompletionRequest,
        ReasoningEffort=instruct.request.ReasoningEffort,
        ValidationMode=instruct.validator.ValidationMode,
        SpecialTokenPolicy=base.SpecialTokenPolicy,
        TokenizerVersion=base.TokenizerVersion,
        MistralTokenizer=mistral_common.tokens.tokenizers.mistral.MistralTokenizer,
    )


@dataclass(frozen=True)
class ReferenceOutcome:
    """What mistral-common made of one conversation: plain text (and tokens, for a tokenizer), or its rejection."""

    text: str | None = None
    tokens: list[int] | None = None
    rejected: str | None = None
    notes: tuple[str, ...] = ()


@dataclass
class Reference:
    """One mistral-common tokenizer version, in the ``tokenizer`` or ``template`` form."""

    version: str
    form: str  # "tokenizer" | "template"
    special_tokens: dict[str, str] = field(default_factory=lambda: {"bos_token": "<s>", "eos_token": "</s>"})

    @property
    def supports_images(self) -> bool:
        return bool(VERSIONS[self.version]["images"])

    @property
    def is_sentencepiece(self) -> bool:
        return self.form == "tokenizer" and bool(VERSIONS[self.version]["spm"])

    @property
    def description(self) -> str:
        if self.form == "tokenizer":
            name, kwargs = VERSIONS[self.version]["factory"]
            args = ", ".join(f"{k}={v}" for k, v in kwargs.items())
            return (
                f"mistral-common {MISTRAL_COMMON_VERSION} MistralTokenizer.{name}({args}) "
                "encode_chat_completion, validation mode 'agnostic'"
            )
        return (
            f"mistral-common {MISTRAL_COMMON_VERSION} build_chat_template(TemplateConfig(version={self.version}, "
            "image_support=True)) rendered by chatjinja"
        )

    # -- tokenizer form ------------------------------------------------------------------

    def _tokenizer(self, images: bool = False) -> Any:
        entry = VERSIONS[self.version]
        factory = entry.get("mm_factory") if images and entry.get("mm_factory") else entry["factory"]
        return _agnostic_tokenizer(factory[0], tuple(sorted(factory[1].items())))

    def encode(self, messages: list[dict], tools: list[dict] | None) -> ReferenceOutcome:
        """The reference rendering of a conversation (HF/OpenAI-style message dicts)."""
        if self.form == "template":
            return self._render_generated(messages, tools)
        mc = _mistral_common()
        tokenizer = self._tokenizer(images=has_images(messages))
        try:
            request = mc.ChatCompletionRequest.from_openai(messages, tools=tools)
            encoded = tokenizer.encode_chat_completion(request)
        except (mc.MistralCommonException, ValueError, TypeError, AssertionError, KeyError) as exc:
            return ReferenceOutcome(rejected=f"{type(exc).__name__}: {_first_line(exc)}")
        raw = tokenizer.instruct_tokenizer.tokenizer
        tokens, collapsed = _collapse_image_tokens(raw, list(encoded.tokens))
        notes = ("image token runs ([IMG]…[IMG_BREAK]…[IMG_END]) collapsed to one [IMG]",) if collapsed else ()
        return ReferenceOutcome(text=self._plain_text(raw, tokens), tokens=tokens, notes=notes)

    def tokenize(self, text: str, images: bool = False) -> list[int] | None:
        """Tokens for a template's text the way mistral-common tokenizes: special-token strings split out,
        every other segment encoded on its own (SentencePiece: one leading space of a segment is the
        prefix space). ``None`` when the text cannot be tokenized that way. ``images``: use the
        multimodal tokenizer, as :meth:`encode` does for a conversation with images."""
        if self.form != "tokenizer":
            return None
        raw = self._tokenizer(images=images).instruct_tokenizer.tokenizer
        specials = _special_token_ids(raw)
        pattern = _special_pattern(tuple(sorted(specials, key=len, reverse=True)))
        tokens: list[int] = []
        for piece in pattern.split(text):
            if not piece:
                continue
            if piece in specials:
                tokens.append(specials[piece])
            elif self.is_sentencepiece:
                if not piece.startswith(" "):
                    return None
                tokens.extend(raw.encode(piece[1:], bos=False, eos=False))
            else:
                tokens.extend(raw.encode(piece, bos=False, eos=False))
        return tokens

    def token_pieces(self, tokens: list[int], images: bool = False) -> list[str]:
        raw = self._tokenizer(images=images).instruct_tokenizer.tokenizer
        return [raw.id_to_piece(t) for t in tokens]

    def _plain_text(self, raw: Any, tokens: list[int]) -> str:
        """The text the tokens stand for (SentencePiece pieces with ``▁`` as a space and byte pieces decoded)."""
        if not self.is_sentencepiece:
            return raw.decode(tokens, special_token_policy=_mistral_common().SpecialTokenPolicy.KEEP)
        out = bytearray()
        for token in tokens:
            piece = raw.id_to_piece(token)
            byte = re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", piece)
            if byte and not raw.is_special(token):
                out.append(int(byte.group(1), 16))
            else:
                out += piece.replace("\u2581", " ").encode("utf-8")
        return out.decode("utf-8", errors="replace")

    # -- template form -------------------------------------------------------------------

    def generated_template(self) -> str:
        return _generated_template(self.version)

    def _render_generated(self, messages: list[dict], tools: list[dict] | None) -> ReferenceOutcome:

        try:
            text = render_source(messages, self.generated_template(), tools, variables=dict(self.special_tokens))
        except Exception as exc:  # noqa: BLE001 - the reference template's own raise_exception is a rejection
            return ReferenceOutcome(rejected=f"{type(exc).__name__}: {_first_line(exc)}")
        return ReferenceOutcome(text=text)


def load_reference(against: str = "v3", form: str = "auto") -> Reference:
    """The reference for ``against`` (see :func:`parse_against`); ``form`` is ``auto``, ``tokenizer`` or ``template``.

    ``auto`` uses the tokenizer where mistral-common bundles one (v1, v2, v3, v3-tekken, v7) and the
    generated template otherwise (v11, v13, v15).
    """
    _mistral_common()
    version = parse_against(against)
    has_tokenizer = VERSIONS[version]["factory"] is not None
    if form == "auto":
        form = "tokenizer" if has_tokenizer else "template"
    if form not in ("tokenizer", "template"):
        raise UnknownReference(f"unknown reference form {form!r} (auto, tokenizer or template)")
    if form == "tokenizer" and not has_tokenizer:
        raise UnknownReference(f"mistral-common {MISTRAL_COMMON_VERSION} bundles no tokenizer file for {version}: use the template form")
    return Reference(version=version, form=form)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def has_images(messages: list[dict]) -> bool:
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            if any(isinstance(c, dict) and c.get("type") in ("image", "image_url") for c in content):
                return True
    return False


@functools.cache
def _agnostic_tokenizer(factory: str, kwargs: tuple[tuple[str, Any], ...]) -> Any:
    """A bundled tokenizer reloaded in ``agnostic`` validation mode (no rule about the last message's role)."""
    mc = _mistral_common()
    try:
        bundled = getattr(mc.MistralTokenizer, factory)(**dict(kwargs))
    except ImportError as exc:  # sentencepiece missing
        raise ReferenceUnavailable(f"{exc}; {INSTALL_HINT}") from None
    path = bundled.instruct_tokenizer.tokenizer.file_path
    return mc.MistralTokenizer.from_file(str(path), mode=mc.ValidationMode.agnostic)


_SPECIALS: dict[str, dict[str, int]] = {}


def _special_token_ids(raw: Any) -> dict[str, int]:
    """Special-token string -> id of a (cached, long-lived) mistral-common tokenizer, keyed by its file."""
    key = str(raw.file_path)
    specials = _SPECIALS.get(key)
    if specials is None:
        specials = {}
        for token_id in sorted(raw.special_ids):
            specials.setdefault(raw.id_to_piece(token_id), token_id)
        _SPECIALS[key] = specials
    return specials


@functools.cache
def _special_pattern(strings: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("(" + "|".join(re.escape(s) for s in strings) + ")")


def _collapse_image_tokens(raw: Any, tokens: list[int]) -> tuple[list[int], bool]:
    specials = _special_token_ids(raw)
    image_ids = {specials[s] for s in _IMAGE_TOKENS if s in specials}
    if not image_ids or not image_ids.intersection(tokens):
        return tokens, False
    img, img_end = specials["[IMG]"], specials.get("[IMG_END]")
    out: list[int] = []
    inside_image = False  # an image is a run of image tokens that ends with [IMG_END]
    for token in tokens:
        if token in image_ids:
            if not inside_image:
                out.append(img)
            inside_image = token != img_end
        else:
            out.append(token)
            inside_image = False
    return out, True


@functools.cache
def _generated_template(version: str) -> str:
    mc = _mistral_common()
    kwargs: dict[str, Any] = {}
    tokenizer_version = mc.TokenizerVersion(version.split("-")[0])
    spm = bool(VERSIONS[version]["spm"])
    if tokenizer_version.supports_model_settings:
        kwargs["reasoning_effort_values"] = tuple(str(e) for e in mc.ReasoningEffort)
        kwargs["reasoning_effort_default"] = str(mc.ReasoningEffort.none)
    config = mc.TemplateConfig(
        version=tokenizer_version,
        spm=spm,
        image_support=bool(VERSIONS[version]["images"]),
        use_special_token_variables=True,
        **kwargs,
    )
    return mc.build_chat_template(config)
