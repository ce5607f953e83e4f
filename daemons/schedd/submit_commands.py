"""condor_submit's commands as htcpool reads them: the job attribute each one sets, or
why it is refused.

The names and attributes are HTCondor's (the condor_submit manual page; the keyword
tables of HTCondor's submit code). Commands about files, streams, notification,
credentials or containers have no effect on an emulated job, but are accepted and
recorded in the job ad as HTCondor records them, so real submit files work
unchanged. Commands whose meaning htcpool does not emulate and which would change
when or where a job runs (other universes, deferral, late materialization) are
refused with the reason, rather than silently ignored.
"""
from __future__ import annotations

# keyword -> (attribute, kind): "string" (the value as a string literal), "expr" (a
# ClassAd expression), "bool" (true/false), "int" (an integer expression, 32-bit).
SIMPLE: dict[str, tuple[str, str]] = {
    # files and streams
    "input": ("In", "string"), "stdin": ("In", "string"),
    "output": ("Out", "string"), "stdout": ("Out", "string"),
    "error": ("Err", "string"), "stderr": ("Err", "string"),
    "log": ("UserLog", "string"), "log_xml": ("UserLogUseXML", "bool"), "dagman_log": ("DAGManNodesLog", "string"),
    "initialdir": ("Iwd", "string"), "initial_dir": ("Iwd", "string"), "iwd": ("Iwd", "string"),
    "job_iwd": ("Iwd", "string"), "remote_initialdir": ("RemoteIwd", "string"),
    "transfer_input": ("TransferIn", "bool"), "transfer_output": ("TransferOut", "bool"),
    "transfer_error": ("TransferErr", "bool"), "stream_input": ("StreamIn", "bool"),
    "stream_output": ("StreamOut", "bool"), "stream_error": ("StreamErr", "bool"),
    "should_transfer_files": ("ShouldTransferFiles", "string"),
    "when_to_transfer_output": ("WhenToTransferOutput", "string"),
    "transfer_input_files": ("TransferInput", "string"), "transferinputfiles": ("TransferInput", "string"),
    "transfer_output_files": ("TransferOutput", "string"), "transferoutputfiles": ("TransferOutput", "string"),
    "transfer_output_remaps": ("TransferOutputRemaps", "string"),
    "transfer_executable": ("TransferExecutable", "bool"), "transfer_plugins": ("TransferPlugins", "string"),
    "transfer_checkpoint_files": ("TransferCheckpoint", "string"),
    "transfer_container": ("TransferContainer", "bool"), "transfer_common_input": ("CommonInputFiles", "string"),
    "preserve_relative_paths": ("PreserveRelativePaths", "bool"),
    "output_destination": ("OutputDestination", "string"), "output_directory": ("OutputDirectory", "string"),
    "max_transfer_input_mb": ("MaxTransferInputMB", "expr"), "max_transfer_output_mb": ("MaxTransferOutputMB", "expr"),
    "erase_output_and_error_on_restart": ("EraseOutputAndErrorOnRestart", "bool"),
    "encrypt_input_files": ("EncryptInputFiles", "string"), "encrypt_output_files": ("EncryptOutputFiles", "string"),
    "dont_encrypt_input_files": ("DontEncryptInputFiles", "string"),
    "dont_encrypt_output_files": ("DontEncryptOutputFiles", "string"),
    "encrypt_execute_directory": ("EncryptExecuteDirectory", "bool"),
    "fetch_files": ("FetchFiles", "string"), "compress_files": ("CompressFiles", "string"),
    "append_files": ("AppendFiles", "string"), "local_files": ("LocalFiles", "string"),
    "file_remaps": ("FileRemaps", "expr"), "buffer_files": ("BufferFiles", "expr"),
    "buffer_size": ("BufferSize", "expr"), "buffer_block_size": ("BufferBlockSize", "expr"),
    "manifest": ("ManifestDesired", "bool"), "manifest_dir": ("ManifestDir", "string"),
    "checkpoint_exit_code": ("SuccessCheckpointExitCode", "int"),
    "checkpoint_destination": ("CheckpointDestination", "string"),
    "skip_filechecks": ("SkipFileChecks", "bool"),
    # notification and bookkeeping
    "notify_user": ("NotifyUser", "string"), "email_attributes": ("EmailAttributes", "string"),
    "description": ("JobDescription", "string"), "batch_name": ("JobBatchName", "string"),
    "batch_id": ("JobBatchId", "string"), "jobset": ("JobSetName", "string"),
    "job_ad_information_attrs": ("JobAdInformationAttrs", "string"),
    "ulog_execute_attrs": ("UserLogExecuteEventAttrs", "string"),
    "submit_event_notes": ("SubmitEventNotes", "string"),
    "submit_event_user_notes": ("SubmitEventUserNotes", "string"),
    "submit_event_notes_attrs": ("SubmitEventNotesAttrs", "string"),
    "dag_node_name": ("DAGNodeName", "string"), "dagman_job_id": ("DAGManJobId", "int"),
    "match_list_length": ("LastMatchListLength", "int"), "project_name": ("ProjectName", "string"),
    # policy expressions: recorded; htcpool's jobs always exit normally and are not re-evaluated
    "periodic_hold": ("PeriodicHold", "expr"), "periodic_hold_reason": ("PeriodicHoldReason", "expr"),
    "periodic_hold_subcode": ("PeriodicHoldSubCode", "expr"), "periodic_release": ("PeriodicRelease", "expr"),
    "periodic_remove": ("PeriodicRemove", "expr"), "periodic_vacate": ("PeriodicVacate", "expr"),
    "on_exit_remove": ("OnExitRemove", "expr"), "on_exit_hold": ("OnExitHold", "expr"),
    "on_exit_hold_reason": ("OnExitHoldReason", "expr"), "on_exit_hold_subcode": ("OnExitHoldSubCode", "expr"),
    "max_retries": ("JobMaxRetries", "int"), "success_exit_code": ("JobSuccessExitCode", "int"),
    "retry_until": ("RetryUntil", "expr"),
    "leave_in_queue": ("LeaveJobInQueue", "expr"),
    "next_job_start_delay": ("NextJobStartDelay", "expr"), "keep_claim_idle": ("KeepClaimIdle", "expr"),
    "job_max_vacate_time": ("JobMaxVacateTime", "expr"),
    "max_job_retirement_time": ("MaxJobRetirementTime", "expr"),
    "want_graceful_removal": ("WantGracefulRemoval", "expr"),
    "job_lease_duration": ("JobLeaseDuration", "expr"),
    "allowed_job_duration": ("AllowedJobDuration", "expr"),
    "allowed_execute_duration": ("AllowedExecuteDuration", "expr"),
    "kill_sig": ("KillSig", "string"), "remove_kill_sig": ("RemoveKillSig", "string"),
    "hold_kill_sig": ("HoldKillSig", "string"), "kill_sig_timeout": ("KillSigTimeout", "int"),
    "noop_job": ("IsNoopJob", "expr"), "noop_job_exit_signal": ("NoopJobExitSignal", "expr"),
    "noop_job_exit_code": ("NoopJobExitCode", "expr"),
    "coresize": ("CoreSize", "int"), "core_size": ("CoreSize", "int"),
    "stack_size": ("StackSize", "expr"),
    "run_as_owner": ("RunAsOwner", "bool"), "load_profile": ("LoadProfile", "bool"),
    "primary_unix_group": ("PrimaryUnixGroup", "string"),
    "want_io_proxy": ("WantIOProxy", "bool"), "want_job_networking": ("WantJobNetworking", "bool"),
    "starter_debug": ("JobStarterDebug", "string"), "starter_log": ("JobStarterLog", "string"),
    "skip_if_dataflow": ("SkipIfDataflow", "bool"),
    # credentials
    "x509userproxy": ("x509userproxy", "string"), "use_x509userproxy": ("UseX509UserProxy", "bool"),
    "use_scitokens": ("UseScitokens", "bool"), "use_scitoken": ("UseScitokens", "bool"),
    "scitokens_file": ("ScitokensFile", "string"), "use_oauth_services": ("OAuthServicesNeeded", "string"),
    "aws_region": ("AWSRegion", "string"),
    "aws_access_key_id_file": ("EC2AccessKeyId", "string"),
    "aws_secret_access_key_file": ("EC2SecretAccessKey", "string"),
    "s3_access_key_id_file": ("EC2AccessKeyId", "string"),
    "s3_secret_access_key_file": ("EC2SecretAccessKey", "string"),
    "gs_access_key_id_file": ("EC2AccessKeyId", "string"),
    "gs_secret_access_key_file": ("EC2SecretAccessKey", "string"),
    "send_credential": ("SendCredential", "bool"),
    # containers
    "container_image": ("ContainerImage", "string"), "docker_image": ("DockerImage", "string"),
    "docker_network_type": ("DockerNetworkType", "string"), "docker_pull_policy": ("DockerPullPolicy", "string"),
    "docker_override_entrypoint": ("DockerOverrideEntrypoint", "bool"),
    "docker_send_credentials": ("DockerSendCredentials", "bool"),
    "container_target_dir": ("ContainerTargetDir", "string"), "mount_under_scratch": ("MountUnderScratch", "string"),
    "container_service_names": ("ContainerServiceNames", "string"),
    "container_is_common": ("ContainerIsCommon", "bool"),
    "cuda_version": ("CUDAVersion", "string"),
    # GPUs (matched through RequestGPUs; the capability bounds are recorded)
    "gpus_minimum_capability": ("GPUsMinCapability", "expr"), "gpus_maximum_capability": ("GPUsMaxCapability", "expr"),
    "gpus_minimum_memory": ("GPUsMinMemory", "expr"), "gpus_minimum_runtime": ("GPUsMinRuntime", "expr"),
}

# Handled one by one in submit.py.
SPECIAL = frozenset({
    "universe", "executable", "cmd", "arguments", "args", "arguments2", "allow_arguments_v1",
    "environment", "env", "environment2", "allow_environment_v1", "getenv", "get_env",
    "requirements", "rank", "preferences", "request_cpus", "request_memory", "request_disk", "request_gpus",
    "accounting_group", "accounting_group_user", "nice_user", "priority", "prio", "hold", "notification",
    "concurrency_limits", "concurrency_limits_expr", "image_size", "job_machine_attrs",
    "job_machine_attrs_history_length",
})

_GRID = "grid universe jobs are not emulated (htcpool runs vanilla-universe jobs)"
_VM = "vm universe jobs are not emulated (htcpool runs vanilla-universe jobs)"
_JAVA = "java universe jobs are not emulated (htcpool runs vanilla-universe jobs)"
_PARALLEL = "parallel universe jobs are not emulated (htcpool runs vanilla-universe jobs)"
_DEFERRAL = "job deferral (cron_*, deferral_*) is not emulated: a job may start as soon as it matches"
_LATE = "late materialization is not emulated: htcpool queues every job of a submission at once"

REFUSED: dict[str, str] = {
    "grid_resource": _GRID, "batch_extra_submit_args": _GRID, "batch_project": _GRID, "batch_queue": _GRID,
    "batch_runtime": _GRID, "delegate_job_gsi_credentials_lifetime": _GRID, "rendezvousdir": _GRID,
    "jar_files": _JAVA, "java_vm_args": _JAVA, "java_vm_arguments": _JAVA, "java_vm_arguments2": _JAVA,
    "machine_count": _PARALLEL, "node_count": _PARALLEL, "nodecount": _PARALLEL,
    "wantparallelscheduling": _PARALLEL, "parallel_script_shadow": _PARALLEL, "parallel_script_starter": _PARALLEL,
    "deferral_time": _DEFERRAL, "deferral_window": _DEFERRAL, "deferral_prep_time": _DEFERRAL,
    "cronwindow": _DEFERRAL, "cronpreptime": _DEFERRAL,
    "max_materialize": _LATE, "max_idle": _LATE, "materialize_max_idle": _LATE,
    "suspend_job_at_exec": "tool daemons (tool_daemon_*, suspend_job_at_exec) are not emulated",
    "request_gpu_memory": "request_gpu_memory is not a machine resource; use gpus_minimum_memory",
    "request_gpus_memory": "request_gpus_memory is not a machine resource; use gpus_minimum_memory",
    "retry_request_memory": "retrying with more memory is not emulated: an emulated job never runs out",
    "retry_request_memory_max": "retrying with more memory is not emulated: an emulated job never runs out",
    "retry_request_memory_increase": "retrying with more memory is not emulated: an emulated job never runs out",
    "retry_request_disk": "retrying with more disk is not emulated: an emulated job never runs out",
    "on_evict_checks": "on_evict_checks is not emulated",
    "interactive": "interactive jobs are not emulated",
}
REFUSED_PREFIXES: tuple[tuple[str, str], ...] = (
    ("ec2_", _GRID), ("gce_", _GRID), ("azure_", _GRID), ("arc_", _GRID), ("cloud_label_", _GRID),
    ("remote_", _GRID), ("vm_", _VM), ("xen_", _VM), ("cron_", _DEFERRAL),
    ("tool_daemon_", "tool daemons (tool_daemon_*) are not emulated"),
    ("require_", "require_<resource> (matching properties of assigned resources) is not emulated"),
    ("interactive_", "interactive jobs are not emulated"),
)

UNIVERSES = {"vanilla": 5, "container": 5, "docker": 5}
OTHER_UNIVERSES = {"scheduler", "local", "grid", "java", "vm", "parallel", "standard"}

# notification = never | always | complete | error (condor_submit writes the number).
NOTIFICATION = {"never": 0, "always": 1, "complete": 2, "error": 3}

KNOWN_COMMANDS = frozenset(SIMPLE) | SPECIAL | frozenset(REFUSED)


def refusal(key: str) -> str | None:
    """Why the submit command `key` (lower case) is refused, or None."""
    if key == "remote_initialdir":
        return None
    reason = REFUSED.get(key)
    if reason is not None:
        return reason
    for prefix, why in REFUSED_PREFIXES:
        if key.startswith(prefix):
            return why
    return None


def custom_resource(key: str) -> str | None:
    """request_<name> for a machine resource: the <name> as written, or None.

    As in condor_submit, the name has at least two characters and does not start
    with '_'; request_cpus, _memory, _disk and _gpus are handled on their own.
    """
    low = key.lower()
    if not low.startswith("request_") or low in SPECIAL or low in REFUSED:
        return None
    name = key[len("request_"):]
    if len(name) < 2 or name.startswith("_") or name.lower() in MISSPELT:
        return None
    return name


# condor_submit refuses these as likely misspellings of the standard requests.
MISSPELT = frozenset({"cpu", "gpu", "mem", "memorys", "disks", "cpuss", "cpu_s"})
