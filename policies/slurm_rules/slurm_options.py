"""What each Slurm release accepts in slurm.conf, a PartitionName or NodeName line, cgroup.conf and gres.conf:
one table, consulted by the renders' builders (config_files.py: a property the target release does not take
is refused, or left out where it is the program's own and release-dependent) and by the stack config (it
refuses free-form lines the release calls defunct or does not know).

Read from SchedMD's sources at each release's newest tag (22.05.11 ... 26.05.3): the option tables and
their handlers in src/common/read_config.c (slurm.conf, partitions), src/interfaces/cgroup.c (cgroup.conf)
and src/interfaces/gres.c (gres.conf), and RELEASE_NOTES. Slurm matches keys case-insensitively.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from .slurm_release import SlurmRelease

File = Literal["slurm.conf", "partition", "node", "cgroup.conf", "gres.conf"]
# What the release that stops accepting an option says of it: an error or fatal() at start ("defunct",
# "removed"), a warning ("deprecated"), or nothing (the parser does not know the key: fatal).
Fate = Literal["defunct", "removed", "deprecated", "unknown"]

R = SlurmRelease.parse


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# The keys Slurm 22.05 knows (the oldest release the program renders for); the gates below add and retire keys.
BASE_KEYS: dict[File, frozenset[str]] = {
    "slurm.conf": _names(
        """AccountingStorageBackupHost AccountingStorageEnforce AccountingStorageExternalHost AccountingStorageHost
        AccountingStorageLoc AccountingStorageParameters AccountingStoragePass AccountingStoragePort AccountingStorageTRES
        AccountingStorageType AccountingStorageUser AccountingStoreFlags AccountingStoreJobComment AcctGatherEnergyType
        AcctGatherFilesystemType AcctGatherInfinibandType AcctGatherInterconnectType AcctGatherNodeFreq AcctGatherProfileType
        AllowSpecResourcesUsage AuthAltParameters AuthAltTypes AuthInfo AuthType BackupAddr BackupController BatchStartTimeout
        BcastExclude BcastParameters BurstBufferParameters BurstBufferType CliFilterPlugins ClusterName CommunicationParameters
        CompleteWait ControlAddr ControlMachine CoreSpecPlugin CpuFreqDef CpuFreqGovernors CredType CryptoType DebugFlags
        DefCPUPerGPU DefMemPerCPU DefMemPerGPU DefMemPerNode DependencyParameters DisableRootJobs DownNodes EioTimeout
        EnforcePartLimits Epilog EpilogMsgTime EpilogSlurmctld ExtSensorsFreq ExtSensorsType FairShareDampeningFactor
        FastSchedule FederationParameters FirstJobId FrontendName GetEnvTimeout GpuFreqDef GresTypes GroupUpdateForce
        GroupUpdateTime HealthCheckInterval HealthCheckNodeState HealthCheckProgram InactiveLimit Include InteractiveStepOptions
        JobAcctGatherFrequency JobAcctGatherParams JobAcctGatherType JobCompHost JobCompLoc JobCompParams JobCompPass
        JobCompPort JobCompType JobCompUser JobContainerType JobCredentialPrivateKey JobCredentialPublicCertificate
        JobFileAppend JobRequeue JobSubmitPlugins KeepAliveTime KillOnBadExit KillWait LaunchParameters LaunchType Licenses
        LogTimeFormat MCSParameters MCSPlugin MailDomain MailProg MaxArraySize MaxDBDMsgs MaxJobCount MaxJobId MaxMemPerCPU
        MaxMemPerNode MaxNodeCount MaxStepCount MaxTasksPerNode MessageTimeout MinJobAge MpiDefault MpiParams
        NodeFeaturesPlugins NodeName NodeSet OverTimeLimit PartitionName PlugStackConfig PluginDir PowerParameters
        PowerPlugin PrEpParameters PrEpPlugins PreemptExemptTime PreemptMode PreemptType PriorityCalcPeriod
        PriorityDecayHalfLife PriorityFavorSmall PriorityFlags PriorityMaxAge PriorityParameters PrioritySiteFactorParameters
        PrioritySiteFactorPlugin PriorityType PriorityUsageResetPeriod PriorityWeightAge PriorityWeightAssoc
        PriorityWeightFairshare PriorityWeightJobSize PriorityWeightPartition PriorityWeightQOS PriorityWeightTRES
        PrivateData ProctrackType Prolog PrologEpilogTimeout PrologFlags PrologSlurmctld PropagatePrioProcess
        PropagateResourceLimits PropagateResourceLimitsExcept RebootProgram ReconfigFlags RequeueExit RequeueExitHold
        ResumeFailProgram ResumeProgram ResumeRate ResumeTimeout ResvEpilog ResvOverRun ResvProlog ReturnToService
        RoutePlugin SallocDefaultCommand SbcastParameters SchedulerAuth SchedulerParameters SchedulerTimeSlice SchedulerType
        ScronParameters SelectType SelectTypeParameters SlurmSchedLogFile SlurmSchedLogLevel SlurmUser SlurmctldAddr
        SlurmctldDebug SlurmctldHost SlurmctldLogFile SlurmctldParameters SlurmctldPidFile SlurmctldPlugstack SlurmctldPort
        SlurmctldPrimaryOffProg SlurmctldPrimaryOnProg SlurmctldSyslogDebug SlurmctldTimeout SlurmdDebug SlurmdLogFile
        SlurmdParameters SlurmdPidFile SlurmdPort SlurmdSpoolDir SlurmdSyslogDebug SlurmdTimeout SlurmdUser SrunEpilog
        SrunPortRange SrunProlog StateSaveLocation SuspendExcNodes SuspendExcParts SuspendProgram SuspendRate SuspendTime
        SuspendTimeout SwitchParameters SwitchType TCPTimeout TaskEpilog TaskPlugin TaskPluginParam TaskProlog TmpFS
        TopologyParam TopologyPlugin TrackWCKey TreeWidth UnkillableStepProgram UnkillableStepTimeout UsePAM VSizeFactor
        WaitTime"""
    ),
    "partition": _names(
        """AllocNodes AllowAccounts AllowGroups AllowQos Alternate CpuBind DefCPUPerGPU DefMemPerCPU DefMemPerGPU
        DefMemPerNode Default DefaultTime DenyAccounts DenyQos DisableRootJobs ExclusiveUser GraceTime Hidden LLN
        MaxCPUsPerNode MaxMemPerCPU MaxMemPerNode MaxNodes MaxTime MinNodes Nodes OverSubscribe OverTimeLimit PreemptMode
        Priority PriorityJobFactor PriorityTier QOS ReqResv ResumeTimeout RootOnly SelectTypeParameters Shared State
        SuspendTime SuspendTimeout TRESBillingWeights"""
    ),
    # A NodeName line's options (read_config.c's _nodename_options).
    "node": _names(
        """BcastAddr Boards CoreSpecCount CoresPerSocket CPUs CPUSpecList CpuBind Feature Features Gres MemSpecLimit NodeAddr
        NodeHostname Port Procs RealMemory Reason Sockets SocketsPerBoard State ThreadsPerCore TmpDisk TRESWeights Weight"""
    ),
    "cgroup.conf": _names(
        """AllowedDevicesFile AllowedKmemSpace AllowedRAMSpace AllowedSwapSpace CgroupAutomount CgroupMountpoint
        CgroupPlugin CgroupReleaseAgentDir ConstrainCores ConstrainDevices ConstrainKmemSpace ConstrainRAMSpace
        ConstrainSwapSpace IgnoreSystemd IgnoreSystemdOnFailure MaxKmemPercent MaxRAMPercent MaxSwapPercent
        MemoryLimitEnforcement MemoryLimitThreshold MemorySwappiness MinKmemSpace MinRAMSpace"""
    ),
    "gres.conf": _names("AutoDetect Count Cores File Flags Links MultipleFiles Name NodeName Type"),
}


# The values some release takes for options whose values are a closed list (an item of a comma list, any case);
# the gates below say which releases. PrivateData: read_config.c's PrivateData handler (slurm.conf and
# slurmdbd.conf), which matches each word as a substring and ignores the rest silently, so a misspelt value
# would hide nothing: refused here instead. PrologFlags: prolog_str2flags (fatal on an unknown flag).
VALUES: dict[tuple[File, str], frozenset[str]] = {
    ("slurm.conf", "PrivateData"): _names("accounts all cloud events jobs nodes partitions reservations usage users"),
    ("slurm.conf", "PrologFlags"): _names("Alloc Contain DeferBatch ForceRequeueOnFail NoHold RunInJob Serial X11"),
}


@dataclass(frozen=True)
class Gate:
    """An option (or one value of it) that some releases accept and others do not."""

    file: File
    key: str
    value: Optional[str] = None  # one value (an item of a comma list); None: the option itself
    since: Optional[SlurmRelease] = None  # the first release that knows it
    until: Optional[SlurmRelease] = None  # the first release that no longer accepts it ...
    fate: Fate = "unknown"  # ... and what that release says of it
    fix: str = ""  # what to write instead


def _keys(file: File, names: str, since: Optional[str] = None, until: Optional[str] = None, fate: Fate = "unknown", fix: str = "") -> list[Gate]:
    return [Gate(file, name, None, R(since) if since else None, R(until) if until else None, fate, fix) for name in names.split()]


GATES: tuple[Gate, ...] = (
    # slurm.conf: values
    Gate(
        "slurm.conf",
        "CommunicationParameters",
        "NoAddrCache",
        until=R("23.11"),
        fate="defunct",
        fix="remove it: Slurm manages cloud nodes' addresses itself since 23.11",
    ),
    Gate(
        "slurm.conf", "SlurmctldParameters", "cloud_reg_addrs", until=R("23.11"), fate="defunct", fix="remove it: the default behaviour since 23.11"
    ),
    Gate("slurm.conf", "ReconfigFlags", "KeepPowerSaveSettings", since=R("23.02")),
    Gate("slurm.conf", "AuthType", "auth/slurm", since=R("23.11"), fix="use auth/munge"),
    Gate("slurm.conf", "SelectType", "select/cons_res", until=R("23.11"), fate="removed", fix="use select/cons_tres"),
    # PrivateData=cloud left the parser in 23.02 (the word is ignored since).
    Gate("slurm.conf", "PrivateData", "cloud", until=R("23.02"), fix="remove it"),
    Gate("slurm.conf", "PrologFlags", "ForceRequeueOnFail", since=R("23.02")),
    Gate("slurm.conf", "PrologFlags", "RunInJob", since=R("24.05")),
    # slurm.conf: keys
    *_keys("slurm.conf", "MaxBatchRequeue PreemptParameters SuspendExcStates", since="23.02"),
    *_keys("slurm.conf", "SlurmctldPlugstack", until="23.02"),
    *_keys("slurm.conf", "SchedulerAuth", until="22.05", fate="defunct", fix="remove it"),
    *_keys("slurm.conf", "ExtSensorsType ExtSensorsFreq", until="23.11", fate="defunct", fix="remove it"),
    *_keys(
        "slurm.conf",
        "JobCredentialPrivateKey JobCredentialPublicCertificate",
        until="23.11",
        fate="defunct",
        fix="remove it (CredType=cred/munge or cred/slurm signs credentials)",
    ),
    *_keys("slurm.conf", "HashPlugin TLSParameters TLSType", since="24.05"),
    *_keys("slurm.conf", "CoreSpecPlugin PowerParameters PowerPlugin", until="24.05", fate="defunct", fix="remove it"),
    *_keys("slurm.conf", "CertmgrParameters CertmgrType DataParserParameters", since="24.11"),
    *_keys("slurm.conf", "CertgenParameters CertgenType EpilogTimeout PrologTimeout", since="25.05"),
    *_keys("slurm.conf", "GetEnvTimeout", until="25.05", fate="defunct", fix="remove it"),
    *_keys("slurm.conf", "FrontendName", until="25.05"),
    *_keys("slurm.conf", "CliFilterParameters HttpParserType JobCompPassScript MetricsType NamespaceType UrlParserType", since="25.11"),
    *_keys("slurm.conf", "AccountingStorageUser", until="25.11", fate="defunct", fix="remove it (slurmdbd.conf's StorageUser)"),
    *_keys(
        "slurm.conf",
        "HealthCheckTimeout LicenseParameters MetricsAuthUsers MetricsParameters PowerAction SlurmctldHttpAuthParameters SlurmdHttpAuthParameters",
        since="26.05",
    ),
    # Parsed, then fatal() in every release the program knows.
    *_keys("slurm.conf", "AccountingStorageLoc FastSchedule SallocDefaultCommand", until="22.05", fate="removed", fix="remove it"),
    *_keys("slurm.conf", "AccountingStoreJobComment", until="22.05", fate="removed", fix="use AccountingStoreFlags=job_comment"),
    # PartitionName options
    *_keys("partition", "MaxCPUsPerSocket PowerDownOnIdle", since="23.02"),
    *_keys("partition", "ExclusiveTopo", since="24.05"),
    *_keys("partition", "Topology", since="25.05"),
    # NodeName options
    *_keys("node", "RestrictedCoresPerGPU", since="24.11"),
    # cgroup.conf
    *_keys("cgroup.conf", "EnableControllers", since="23.02"),
    *_keys("cgroup.conf", "RootOwnedCgroups", since="23.02", until="23.11"),
    *_keys("cgroup.conf", "SignalChildrenProcesses", since="23.11"),
    *_keys("cgroup.conf", "ConstrainKmemSpace AllowedKmemSpace MaxKmemPercent MinKmemSpace", until="23.11", fix="remove it"),
    *_keys("cgroup.conf", "CgroupAutomount", until="23.11", fate="defunct", fix="remove it"),
    *_keys("cgroup.conf", "SystemdTimeout", since="24.05"),
    *_keys("cgroup.conf", "EnableExtraControllers", since="25.05"),
    *_keys("cgroup.conf", "CgroupSlice", since="25.11"),
    *_keys("cgroup.conf", "CgroupReleaseAgentDir", until="25.11"),
    *_keys("cgroup.conf", "CgroupJobIdPaths", since="26.05"),
    Gate("cgroup.conf", "CgroupPlugin", "cgroup/v1", until=R("25.05"), fate="deprecated", fix="run the GPU nodes on cgroup v2"),
    # gres.conf: the gpu/nvidia plugin (the driver's files, no NVML library) arrived in 24.11.
    Gate("gres.conf", "AutoDetect", "nvidia", since=R("24.11"), fix="use AutoDetect=nvml"),
)


def _items(value: str) -> list[str]:
    return [item.strip().lower() for item in value.split(",") if item.strip()]


def _gates(file: File, key: str) -> list[Gate]:
    return [gate for gate in GATES if gate.file == file and gate.key.lower() == key.lower()]


def _unknown_value(file: File, key: str, value: str) -> Optional[str]:
    """A value of `key` that no release takes, where the option's values are a closed list (VALUES), or None."""
    known = next((names for (f, k), names in VALUES.items() if f == file and k.lower() == key.lower()), None)
    if known is None:
        return None
    lowered = {name.lower() for name in known}
    return next((item for item in _items(value) if item not in lowered), None)


def _known(file: File, key: str) -> bool:
    """Some release the program knows takes `key` in `file`."""
    return key.lower() in {k.lower() for k in BASE_KEYS[file]} or any(g.value is None and g.since for g in _gates(file, key))


def _verdict(release: SlurmRelease, gate: Gate) -> Optional[str]:
    what = f"{gate.key}={gate.value}" if gate.value else gate.key
    fix = f"; {gate.fix}" if gate.fix else ""
    if gate.since and release < gate.since:
        return f"Slurm {release} does not know {what} (new in {gate.since}){fix}"
    if gate.until and release >= gate.until:
        said = {"unknown": "does not know", "defunct": "calls defunct", "removed": "has removed", "deprecated": "deprecates"}[gate.fate]
        since = "" if gate.until == R("22.05") else f" (since {gate.until})"
        return f"Slurm {release} {said} {what}{since}{fix}"
    return None


def objection(release: SlurmRelease, file: File, key: str, value: str = "") -> Optional[str]:
    """Why `release` does not take `key=value` in `file` (unknown, defunct, removed or deprecated), or None."""
    gates = _gates(file, key)
    if not _known(file, key):
        what = {"partition": "PartitionName", "node": "NodeName"}.get(file, file)
        return f"{key} is not a {what} option of any Slurm release: correct or remove it"
    if (item := _unknown_value(file, key, value)) is not None:
        known = next(names for (f, k), names in VALUES.items() if f == file and k.lower() == key.lower())
        return f"{key}={item} is not a value of any Slurm release (it takes {', '.join(sorted(known, key=str.lower))}): correct or remove it"
    items = _items(value)
    for gate in gates:
        if (gate.value is None or gate.value.lower() in items) and (reason := _verdict(release, gate)):
            return reason
    return None


def known_anywhere(file: File, key: str, value: str = "") -> bool:
    """Some release the program knows takes `key` (and, where its values are a closed list, `value`) in `file`."""
    return _known(file, key) and _unknown_value(file, key, value) is None


def accepts(release: SlurmRelease, file: File, key: str, value: str = "") -> bool:
    """`release` takes `key=value` in `file` without complaint other than a deprecation warning."""
    if not known_anywhere(file, key, value):
        return False
    gates = [g for g in _gates(file, key) if g.value is None or g.value.lower() in _items(value)]
    return objection(release, file, key, value) is None or all(g.fate == "deprecated" for g in gates if _verdict(release, g))


def line_objection(release: SlurmRelease, file: File, line: str) -> Optional[str]:
    """Why `release` would not take a config line (each `Key=Value` of it; a NodeName/PartitionName/NodeSet line's
    first pair names it, and a PartitionName line's further options are partition options), or None."""
    pairs = [word.partition("=") for word in line.split("#", 1)[0].split()]
    if not pairs:
        return None
    head = pairs[0][0]
    if reason := objection(release, file, head, pairs[0][2]):
        return reason
    if file == "slurm.conf" and head.lower() == "partitionname":
        return next((r for key, _, value in pairs[1:] if (r := objection(release, "partition", key, value))), None)
    if file == "slurm.conf" and head.lower() == "nodename":
        return next((r for key, _, value in pairs[1:] if (r := objection(release, "node", key, value))), None)
    if file == "slurm.conf" and head.lower() in ("nodeset", "downnodes", "include"):
        return None  # their few options are their own syntax, not slurm.conf keys
    return next((r for key, _, value in pairs[1:] if (r := objection(release, file, key, value))), None)


def rendered(release: SlurmRelease, file: File, lines: list[str]) -> list[str]:
    """The lines of a render that `release` accepts: an option new after it, or retired by it, is left out."""
    kept = []
    for line in lines:
        key, _, value = line.partition("=")
        if not _known(file, key):
            raise ValueError(f"rendered {file} line {line!r}: {key} is no {file} option of any Slurm release")
        if (item := _unknown_value(file, key, value)) is not None:
            raise ValueError(f"rendered {file} line {line!r}: {item} is no {key} value of any Slurm release")
        if accepts(release, file, key, value):
            kept.append(line)
    return kept


def gpu_autodetect(release: SlurmRelease) -> str:
    """gres.conf's GPU AutoDetect plugin: gpu/nvidia (reads the driver's files, needs no NVML library) where the
    release has it, else gpu/nvml."""
    return "nvidia" if accepts(release, "gres.conf", "AutoDetect", "nvidia") else "nvml"
