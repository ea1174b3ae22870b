"""The one typed configuration of every command, documented field by field.

    sections.py   model, generation, optim: the sections every command shares
    train.py      TrainConfig (`rlvr train`) and its presets
    commands.py   EvalConfig, SampleConfig, SFTConfig, RewardModelConfig
    run.py        RunSection: the keys every training command has about the run itself, checked once
    loading.py    the layers (defaults, preset, file, --set) in canonical form -> a checked config
    yaml_files.py reading YAML and --set overrides, merging layers; building.py: dataclasses from plain values
"""

from rlvr.config.building import config_to_yaml, from_dict, save_config
from rlvr.config.commands import EvalConfig, ProblemsConfig, RewardModelConfig, SampleConfig, SFTConfig
from rlvr.config.loading import config_from_dict, load_command_config, load_config
from rlvr.config.presets import PRESETS
from rlvr.config.sections import (
    BAD_DEVICE,
    DEVICE_PATTERN,
    DistributedConfig,
    EnvironmentConfig,
    GenerationConfig,
    LoggingConfig,
    LoraConfig,
    ModelConfig,
    OptimConfig,
    RolloutCorrectionConfig,
    VLLMConfig,
)
from rlvr.config.train import (
    DEFAULT_REFLECTION_PHRASES,
    AlgorithmConfig,
    DataConfig,
    FewShotTurn,
    RewardConfig,
    SamplingConfig,
    TrainConfig,
)
from rlvr.config.yaml_files import parse_override

__all__ = [
    "BAD_DEVICE",
    "DEFAULT_REFLECTION_PHRASES",
    "DEVICE_PATTERN",
    "PRESETS",
    "AlgorithmConfig",
    "DataConfig",
    "DistributedConfig",
    "EnvironmentConfig",
    "EvalConfig",
    "FewShotTurn",
    "GenerationConfig",
    "LoggingConfig",
    "LoraConfig",
    "ModelConfig",
    "OptimConfig",
    "ProblemsConfig",
    "RewardConfig",
    "RewardModelConfig",
    "RolloutCorrectionConfig",
    "SFTConfig",
    "SampleConfig",
    "SamplingConfig",
    "TrainConfig",
    "VLLMConfig",
    "config_from_dict",
    "config_to_yaml",
    "from_dict",
    "load_command_config",
    "load_config",
    "parse_override",
    "save_config",
]
