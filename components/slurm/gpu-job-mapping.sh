#!/bin/bash
# dcgm-exporter's HPC job mapping, kept by slurmd (as root, on each node of a job): as the Prolog, before the
# job, one file per GPU of the job, named by its index and holding the job's id, in the directory the GPU
# operator's dcgm-exporter reads (hpcJobMapping), whose series of these GPUs then carry hpc_job="<job id>";
# as the Epilog, after the job, those files removed again.
# A failing Prolog or Epilog drains the node (and requeues the job): whatever goes wrong is logged, and exit 0.
set -u
PATH=/usr/sbin:/usr/bin:/sbin:/bin
readonly mapping_dir=@MAPPING_DIR@
context=${SLURM_SCRIPT_CONTEXT:-}
log() { echo "gpu-job-mapping ($context): $*" >&2; }

job=${SLURM_JOB_ID:-}
# The job's GPUs on this node, by index: Slurm sets it for the Prolog and the Epilog from 22.05 to 26.05
# (CUDA_VISIBLE_DEVICES too, unless gres.conf's Flags leave it out).
gpus=${SLURM_JOB_GPUS:-}
[[ -n $gpus ]] || exit 0
# Digits only (a job id is a uint32): nothing else can reach a file name or its content.
if [[ ! $job =~ ^[0-9]{1,10}$ ]]; then
    log "job id '$job' is not a number: mapping left as it is"
    exit 0
fi
if [[ ! $gpus =~ ^[0-9]{1,4}(,[0-9]{1,4})*$ ]]; then
    log "job $job: GPU list '$gpus' is not comma-separated indices: mapping left as it is"
    exit 0
fi
if [[ ! -d $mapping_dir ]]; then
    log "job $job: no directory $mapping_dir (its hostPath is not mounted): no mapping"
    exit 0
fi
IFS=, read -r -a indices <<<"$gpus"
for index in "${indices[@]}"; do
    file="$mapping_dir/$index"
    case $context in
    prolog_slurmd)
        # Written beside it, then renamed: dcgm-exporter never reads half a file (it skips names that are not indices).
        partial="$mapping_dir/.$index.$job"
        if ! { printf '%s\n' "$job" >"$partial" && mv -f -- "$partial" "$file"; }; then
            rm -f -- "$partial"
            log "job $job: could not write $file"
        fi
        ;;
    epilog_slurmd)
        # Only this job's: a file another job wrote since is left to that job's Epilog.
        if [[ -f $file && "$(<"$file")" == "$job" ]] && ! rm -f -- "$file"; then
            log "job $job: could not remove $file"
        fi
        ;;
    *)
        log "run as '$context', not as slurmd's Prolog or Epilog: nothing done"
        exit 0
        ;;
    esac
done
exit 0
