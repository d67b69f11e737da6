"""The error every layer may raise for a wrong setting: on the ground floor, so that modules below the config
package (``kernels``, ``provenance``) raise it without importing the package."""
from __future__ import annotations


class ConfigError(ValueError):
    """A config value is wrong; the message names the key and what is allowed."""
