"""The software each stage runs with, and the cluster requests of each family of jobs.

The pip route (default) runs every stage with the interpreter snakemake runs in (the project's venv); with
--software-deployment-method conda each rule runs in its envs/ environment's python. Every shell command names
its interpreter through TOWERS or TRAIN (the report, PY): one global of the rule files on purpose, never a param,
so that neither the venv's path nor the deployment method is a rerun trigger (`snakemake --lint` reports each use;
tests/workflow/test_lint.py allows them)."""
from __future__ import annotations

import os
import shlex
import sys


class Software:
    def __init__(self, config: dict, *, python: str = sys.executable, conda: bool = False, envs: str = "envs",
                 hub_models: list = ()):
        """`hub_models`: those the papers' settings name (towers.plan.gathered)."""
        self.conda = conda
        self.py = "python" if conda else shlex.quote(python)   # quoted: a virtualenv path may hold spaces
        self.envs = envs
        self.cpu_env = f"{envs}/cpu.yaml"
        # a checkpoint named by hub name (not package:<module>, not a folder here) is fetched through the hub's cache
        self.hub_checkpoints = [c["source"] for c in config["checkpoints"].values()
                                if not c["source"].startswith("package:") and not os.path.exists(c["source"])]
        # a profile that names no hub model never reaches the hub (the workflow sets HF_HUB_OFFLINE then)
        self.offline = not (config["tokenizer"]["hub_model"] or config["encoder"]["hub_model"] or self.hub_checkpoints
                            or any(hub_models))
        self.towers = f"{self.py} -m towers"
        self.gpu_job = config["resources"]["gpu_jobs"]       # cluster requests of encoding/search jobs (profiles/)
        self.train_job = config["resources"]["train_jobs"]   # of training jobs
        self.java_job = config["resources"]["java_jobs"]     # and of Pyserini's
        self.torch_env = f"{envs}/gpu.yaml" if self.gpu_job.get("gpu", 0) else self.cpu_env
        self.train_env = f"{envs}/gpu.yaml" if self.train_job.get("gpu", 0) else self.cpu_env
        # A training job given several GPUs runs data-parallel, one process a GPU (towers.training.distributed).
        self.train_processes = max(1, self.train_job.get("gpu", 0))
        train = (self.towers if self.train_processes == 1
                 else f"{self.py} -m towers.training.distributed {self.train_processes}")
        # How training steps run on a GPU (params `gpu`, settings.Speed): each switch that is on, as the training
        # stages' flags, passed in TOWERS_SPEED before TRAIN, so the rules' commands (their code, a rerun trigger)
        # stay as they are and a profile with every switch off plans the commands it always did.
        self.gpu_flags = " ".join(f"--{k.replace('_', '-')} {','.join(map(str, v)) if isinstance(v, list) else int(v)}"
                                  for k, v in config.get("gpu", {}).items() if v)
        self.train = f"TOWERS_SPEED={shlex.quote(self.gpu_flags)} {train}" if self.gpu_flags else train
        self.java_env = f"{envs}/java.yaml"
