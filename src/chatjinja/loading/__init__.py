"""Finding chat templates: bundled names and model names, ``.jinja`` files (model folders and GGUF come later)."""

from .bundled import bundled_manifest, bundled_names, bundled_templates_dir, load_bundled
from .resolve import load_template

__all__ = ["bundled_manifest", "bundled_names", "bundled_templates_dir", "load_bundled", "load_template"]
