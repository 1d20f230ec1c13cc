"""PromQL as every panel writes it: the matchers of the template variables."""

from .config import CONFIG

# The matchers every inferprobe selector carries: the site labels, then the variables.
S = ", ".join(f'{v}=~"${v}"' for v in CONFIG["site_labels"] + CONFIG["variables"])
