"""Study configuration: which config a run uses and its defaults (``loading``), studies expanded into points
(``points``), what a point's blocks say for each stage (``params``), the checks beyond the JSON schema
(``checks``), the schema and its defaults (``schema``), each expanded point checked against it (``point_schema``)
and what a config can name, checked without torch (``catalog``: datasets, architectures, symmetry, generators).
Defaults live in one place, the schema ``workflow/schemas/config.schema.yaml``: code reads
``point.merge["lambdas"]`` and never carries a fallback of its own. ``ConfigError`` (``lmcflow.errors``) is
re-exported here."""
from lmcflow.config.checks import (
    check_alignment_semantics,
    check_bundle_points,
    check_identifiability_semantics,
    check_semantics,
)
from lmcflow.config.loading import (
    DEFAULT_CONFIG,
    POINT_BLOCKS,
    REPLICATE_INPUT,
    STUDY_KEYS,
    add_replicate_studies,
    deep_merge,
    load_config_file,
    parse_overrides,
    replicate_claim_cfg,
    replicate_name,
    replicate_of,
    resolve_config,
    validate_config,
)
from lmcflow.config.params import (
    ALIGNABLE_ARCHS,
    ANALYSIS_FLAGS,
    BUFFER_SYMMETRY_KEYS,
    EXECUTION_KEYS,
    alignment_params,
    analysis_params,
    bundle_key,
    data_shape_key,
    learning_settings,
    many_sizes,
    mechanism_lambdas,
    mechanism_methods,
    mechanism_params,
    merge_methods,
    repairs,
    repairs_method,
)
from lmcflow.config.partners import expand_points
from lmcflow.config.points import (
    Point,
    canonical,
    expand_study,
    format_value,
    get_dotted,
    lambda_grid,
    point_matches,
    point_value,
    same_value,
    seed_pairs,
    study_points,
    sweep_grids,
    swept_values,
)
from lmcflow.errors import ConfigError

__all__ = [
    "load_config_file", "parse_overrides",
    "REPLICATE_INPUT", "add_replicate_studies", "replicate_claim_cfg", "replicate_name", "replicate_of",
    "ALIGNABLE_ARCHS", "ANALYSIS_FLAGS", "BUFFER_SYMMETRY_KEYS", "DEFAULT_CONFIG", "EXECUTION_KEYS", "POINT_BLOCKS",
    "STUDY_KEYS", "ConfigError", "Point", "alignment_params", "analysis_params", "bundle_key", "canonical",
    "check_alignment_semantics", "check_bundle_points", "check_identifiability_semantics", "check_semantics",
    "data_shape_key", "deep_merge", "expand_points", "expand_study", "format_value", "get_dotted", "lambda_grid",
    "learning_settings", "mechanism_lambdas", "mechanism_methods", "mechanism_params", "many_sizes", "merge_methods",
    "repairs",
    "repairs_method",
    "point_matches", "point_value", "resolve_config", "same_value", "seed_pairs", "study_points", "sweep_grids",
    "swept_values",
    "validate_config",
]
