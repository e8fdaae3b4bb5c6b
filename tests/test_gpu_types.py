"""Typed GPUs: each pool's Slurm GRES type, right by construction (docs/operators.md, "Typed GPUs")."""

from __future__ import annotations

import copy

import pytest

from components.config import ConfigError, parse_config
from components.config.pools import default_gpu_type
from components.slurm import ack, slinky
from components.slurm.common import tenant_settings
from tests.harness import body, stack_config

# Real gpu.product label values and the name Slurm's AutoDetect makes of the same GPU's model (lower case, spaces as '_').
DETECTED = {
    "NVIDIA-H100-80GB-HBM3": "nvidia_h100_80gb_hbm3",  # seen on a real H100 (slurmd -C)
    "NVIDIA-A100-SXM4-80GB": "nvidia_a100-sxm4-80gb",  # NVML: "NVIDIA A100-SXM4-80GB"
    "NVIDIA-H200": "nvidia_h200",
    "NVIDIA-A10": "nvidia_a10",
    "NVIDIA-L40S": "nvidia_l40s",
    "Tesla-V100-SXM2-16GB": "tesla_v100-sxm2-16gb",
    "NVIDIA-RTX-A6000": "nvidia_rtx_a6000",
}


@pytest.mark.parametrize("product,detected", sorted(DETECTED.items()))
def test_the_default_type_is_a_substring_of_the_name_slurm_detects(product, detected):
    gpu_type = default_gpu_type(product)
    assert gpu_type and gpu_type in detected and gpu_type.isalnum() and gpu_type == gpu_type.lower()


def test_the_default_type_is_the_model_word():
    assert [default_gpu_type(p) for p in ("NVIDIA-H100-80GB-HBM3", "NVIDIA-L40S", "NVIDIA-H100-80GB-HBM3-SHARED")] == ["h100", "l40s", "h100"]


def with_pool(stack: str, **fields):
    raw = copy.deepcopy(stack_config(stack))
    pool = next(p for p in raw["nodePools"] if p.get("gpusPerNode"))
    pool.update(fields)
    for key, value in list(pool.items()):
        if value is None:
            del pool[key]
    return raw


def test_slinky_nodesets_and_acks_cloud_nodes_carry_the_pools_type():
    config = parse_config(stack_config("prod-hcm"))  # Slinky, NVIDIA-H100-80GB-HBM3
    assert {slinky.nodeset(config, pool)["spec"]["extraConf"] for pool in config.gpu_pools} == {"Gres=gpu:h100:8"}
    config = parse_config(stack_config("staging-hangzhou"))  # ACK, NVIDIA-A10, autoscaling
    node_lines = [line for line in ack.slurm_conf(config).splitlines() if line.startswith("NodeName=")]
    assert node_lines and all(" Gres=gpu:a10:1 " in line for line in node_lines)
    assert body(ack.gres_conf(config)) == "NodeName=ack-slurm-cluster-1-worker-a10-[0-3] Name=gpu Type=a10 File=/dev/nvidia0\n"


def test_a_configured_type_that_is_part_of_the_product_is_rendered():
    config = parse_config(with_pool("prod-hcm", gpuType="hbm3"))
    assert slinky.nodeset(config, config.gpu_pools[0])["spec"]["extraConf"] == "Gres=gpu:hbm3:8"


def test_a_pool_without_gpu_product_stays_untyped():
    config = parse_config(with_pool("prod-hcm", gpuProduct=None))
    assert slinky.nodeset(config, config.gpu_pools[0])["spec"]["extraConf"] == "Gres=gpu:8"


@pytest.mark.parametrize(
    "fields,reason",
    [
        ({"gpuType": "l40s"}, "is not part of one word of gpuProduct NVIDIA-H100-80GB-HBM3 (h100, 80gb, hbm3)"),
        ({"gpuType": "h10080gb"}, "substring of the name it detects (here about nvidia_h100_80gb_hbm3)"),
        ({"gpuType": "h100", "gpuProduct": None}, "needs gpuProduct"),
    ],
)
def test_a_type_that_cannot_match_the_detected_gpu_is_refused_by_key_path(fields, reason):
    with pytest.raises(ConfigError) as caught:
        parse_config(with_pool("prod-hcm", **fields))
    line = next(line for line in str(caught.value).splitlines() if "nodePools[" in line and ".gpuType" in line)
    assert reason in line, line


@pytest.mark.parametrize("value", ["H100", "h100_80gb", "gpu:h100", "h 100", ""])
def test_a_type_slurm_lines_cannot_carry_is_refused(value):
    with pytest.raises(ConfigError, match=r"nodePools\[\d\]\.gpuType"):
        parse_config(with_pool("prod-hcm", gpuType=value))


def test_a_gpu_type_on_a_pool_without_gpus_is_refused():
    raw = copy.deepcopy(stack_config("prod-hcm"))
    system = next(i for i, p in enumerate(raw["nodePools"]) if not p.get("gpusPerNode"))
    raw["nodePools"][system]["gpuType"] = "h100"
    with pytest.raises(ConfigError, match=rf"nodePools\[{system}\]\.gpuType: is for GPU pools"):
        parse_config(raw)


def test_accounting_tracks_every_gpu_and_each_type_the_pools_have():
    # The tenants' GrpTRES limit gres/gpu, which typed requests count as well; the typed TRES show use per model.
    from tests.services import as_operator

    raw = as_operator(stack_config("dev-lab"), "slinky", "24.11")
    assert ("AccountingStorageTRES", "gres/gpu") in tenant_settings(parse_config(raw))  # untyped pools
    gpu_pools = [pool for pool in raw["nodePools"] if pool.get("gpusPerNode")]
    assert len(gpu_pools) == 2
    for pool, product in zip(gpu_pools, ("NVIDIA-L40S", "NVIDIA-H100-80GB-HBM3"), strict=True):
        pool["gpuProduct"] = product
    assert ("AccountingStorageTRES", "gres/gpu,gres/gpu:h100,gres/gpu:l40s") in tenant_settings(parse_config(raw))
