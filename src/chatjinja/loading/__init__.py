"""Finding chat templates: bundled names, template files, model folders, tokenizer configs, GGUF files and the hub cache.

Every loader returns a plain :class:`TemplateRecord`; the front door (``chatjinja.load_template``) makes it a ``ChatTemplate``.
"""

from .bundled import bundled_manifest, bundled_names, bundled_templates_dir, load_bundled
from .folder import load_config_file, load_model_folder, scan_model_folder
from .gguf_file import load_gguf, scan_gguf
from .hub_cache import hub_cache_dir, hub_snapshot
from .record import TemplateRecord
from .resolve import load_hub_model, load_template, template_record
from .selection import TemplateEntry, TemplateSet, select_template

__all__ = [
    "TemplateEntry",
    "TemplateRecord",
    "TemplateSet",
    "bundled_manifest",
    "bundled_names",
    "bundled_templates_dir",
    "hub_cache_dir",
    "hub_snapshot",
    "load_bundled",
    "load_config_file",
    "load_gguf",
    "load_hub_model",
    "load_model_folder",
    "load_template",
    "scan_gguf",
    "scan_model_folder",
    "select_template",
    "template_record",
]
