// Package procnode is a kubelet stand-in, a "process node": pods that a
// real kube-scheduler binds to it run on this machine as local processes.
// It backs `knit local` and the integration tests; several nodes share one
// machine, each on its own loopback address.
//
// # What it does
//
// New and Run register a Node (capacity, allocatable = capacity, Ready and
// the pressure conditions, InternalIP and Hostname addresses, nodeInfo with
// kubeletVersion v1.34.4-knit). The Node is born with the taint
// node.kubernetes.io/not-ready:NoSchedule, which the node lifts itself once
// it has posted Ready. A coordination.k8s.io Lease in kube-node-lease,
// owned by the Node, is renewed every LeaseDuration/4; the status is posted
// again every StatusInterval. A Node that already exists (a restart) is
// updated, not replaced.
//
// Pods bound to the node (an informer on spec.nodeName) are synced one key
// at a time from a rate-limited work queue, like a controller: each sync
// reads the pod from the lister and its containers' state from disk, starts
// and stops processes, and writes the pod status through the status
// subresource. It follows the kubelet: init containers one after the other
// (sidecar init containers, restartPolicy Always, only need to be running),
// then all containers at once; restarts by restartPolicy with the kubelet's
// crash-loop back-off (first restart at once, then Config.RestartBackoffBase
// doubling up to RestartBackoffMax); a running container whose image is
// patched is stopped and started again with restartCount+1; phase,
// conditions and container statuses as the kubelet computes them. A pod
// being deleted has every process stopped (SIGTERM to each container's
// main process, the deletion's grace period, SIGKILL to all that is left),
// gets its final status, and is deleted for good (grace period 0, UID
// precondition); its folder goes when it has left the API. Pods that
// vanish from the API (force deletion) are stopped and removed too.
//
// # In-place resize
//
// Pods are resized through the resize subresource (InPlacePodVerticalScaling,
// on by default since 1.33), and the node answers as the 1.34 kubelet's
// allocation manager does, as far as status goes. When a pod's first
// container starts, the node records the spec as the pod's allocation
// (the kubelet's checkpoint, kept in the pod's folder), and every
// container that has run reports it: containerStatuses[].allocatedResources
// (requests) and .resources (requests and limits). The API server refuses
// to resize a running pod whose status lacks resources ("Pod running on
// node without support for resize"), so this is what allows resizing at
// all. When the spec of a started, non-terminal pod differs from its
// allocation, the node decides, one pod at a time:
//
//   - Accepted, if the new requests fit the node's allocatable beside the
//     allocations of its other non-terminal pods: allocation,
//     allocatedResources and resources follow the spec at once, and no
//     resize condition is left. PodResizeInProgress, which a kubelet shows
//     until the runtime has applied a resize, is never set: there is
//     nothing to apply.
//   - PodResizePending with reason Infeasible, if the pod's cpu or memory
//     requests exceed the node's allocatable. It stays until the spec
//     changes again.
//   - PodResizePending with reason Deferred, if the requests fit the node
//     but not the room left (pod count, cpu, memory, ephemeral-storage and
//     the extended resources the node advertises, counted as the kubelet's
//     admission counts them, with its message). It is decided again when a
//     pod of the node ends or leaves, when another resize is accepted, and
//     every 3 minutes, as the kubelet retries.
//
// The condition's observedGeneration is the pod generation decided on;
// status.observedGeneration is the pod's, as always. A pod none of whose
// containers has started needs nothing (it starts with its spec), and a
// terminal pod reports no resize condition. A container (re)started while
// a resize is pending runs with its allocation, as its downward API values
// show. The node admits every pod the scheduler binds, so allocations are
// only counted for resizes.
//
// # A process is not a container
//
// There is no image, no mount namespace, no network namespace, no cgroup:
//
//   - command + args are run as given (args alone when command is empty).
//     With neither, there is no image entrypoint to fall back on: the
//     container waits with reason CreateContainerError, as the kubelet
//     reports a container it cannot create. The image is only reported.
//   - Paths are translated. Every volumeMount's mountPath maps to the
//     volume's folder under the pod's folder (hostPath: the host path
//     itself; subPath and subPathExpr honoured), and the
//     terminationMessagePath (default /dev/termination-log) maps to a file
//     per run. Every occurrence of a mapped path in command, args, env
//     values and workingDir is rewritten to its host location, longest
//     mountPath first, in one left-to-right pass. A path only matches on its
//     own: preceded by the start of the string or a delimiter, followed by
//     the end, '/' or a delimiter. Delimiters are white space, quotes and
//     the characters shell syntax, flags and path lists put around paths:
//     ; : , = ( ) < > | & { } [ ] $ ! * ?. So `sh -c 'echo boom >
//     /dev/termination-log'` writes the termination message, and
//     `--conf=/etc/app/x.yaml` or PATH=/opt/bin:/usr/bin work, while /data
//     never matches inside /data2 or /x/data. Paths a program computes or
//     has compiled in (for example client-go's in-cluster config reading
//     /var/run/secrets/kubernetes.io/serviceaccount) are not translated;
//     pass such paths through env or args instead.
//   - workingDir (translated) is created if missing; without one a process
//     runs in a folder of its own under the pod's folder.
//   - Environment: Config.BaseEnv (default PATH and HOME of this process)
//     stands in for the image's ENV; then envFrom, env with $(VAR)
//     expansion, fieldRef (metadata.name/namespace/uid, labels['k'],
//     annotations['k'], spec.nodeName, spec.serviceAccountName,
//     status.hostIP(s), status.podIP(s)), resourceFieldRef (unset limits
//     are the node's allocatable), secretKeyRef and configMapKeyRef read
//     through the API; KUBERNETES_SERVICE_HOST/PORT (and the rest of the
//     kubernetes Service variables) when APIServerHost/Port are set, and
//     HOSTNAME = the pod's hostname (its name unless spec.hostname is set).
//   - Volumes: emptyDir (any medium) is a folder; hostPath is used in place
//     (created for DirectoryOrCreate and the empty type, FileOrCreate makes
//     the file); secret, configMap, downwardAPI and projected volumes
//     (serviceAccountToken through the TokenRequest API, so the
//     kube-api-access-* volume the ServiceAccount admission plugin adds
//     works) are written as files once, when the pod is set up, and not
//     refreshed. Other volume types keep the pod in ContainerCreating.
//   - Every pod shares the host network: hostIP, podIP and their plural
//     forms are the node's Address. Two pods binding the same port on the
//     same address collide, as hostNetwork pods do.
//   - No probes run and no lifecycle hooks; a running container is started
//     and ready at once. Resources are reported and handed to the downward
//     API, never enforced (so a resize changes bookkeeping only); securityContext is ignored, processes run as the
//     node's user. activeDeadlineSeconds, ephemeral containers and events
//     are not implemented.
//
// # Processes, the shim, and restarts
//
// Each run of a container is supervised by a shim: this same binary,
// re-executed (through /bin/sh, so that it is not the node's child) with
// KNIT_PROCNODE_SHIM naming the run's spec file. That is why
// RunShimIfRequested must be the first call of main and of TestMain. The
// shim leads a session of its own and is a child subreaper, starts the
// process in its own process group with stdout and stderr appended to the
// run's log, records pid and start time, forwards SIGTERM, SIGINT, SIGHUP,
// SIGQUIT, SIGUSR1 and SIGUSR2 to the process group, and when the process
// ends kills whatever is left of its tree (as the end of a container's PID
// 1 ends the container) and records the exit code (128+signal for a
// signal) and finish time atomically. Stopping a run sends SIGTERM to the
// container's main process only, as a container runtime signals only a
// container's PID 1 (knit-launcher, PID 1 of a task container, forwards
// it to its command; a SIGTERM to every process would reach the command
// twice), waits the grace period, then sends SIGKILL to every process of
// the run (the shim's session, which holds the container's process group,
// and every descendant of the shim). Ended shims are reaped by init (PID 1); under an init that
// does not reap orphans they stay zombies, which are harmless and are never
// taken for live shims.
//
// Shims do not die with the node. A node started later on the same Dir
// (another process) adopts them: runs whose shim is alive keep running,
// runs that ended meanwhile are picked up from their exit records, and a
// run whose shim vanished without a record is reported terminated with
// ContainerStatusUnknown (exit code 137) and its leftover processes are
// killed. A shim counts as alive only if its pid exists, is no zombie,
// started at the clock tick recorded (/proc/<pid>/stat) and, where
// readable, carries the run's spec path in /proc/<pid>/environ, so a
// reused pid is never taken for a shim; records of an earlier boot
// (boot_id) are never taken for live processes, nor used to kill any.
// Restart counts, back-off steps,
// images and the reasons the node stopped a run are all kept on disk.
// StopAll ends every process a Dir knows of, for `knit local down` and
// test clean-up.
//
// # On disk
//
//	<Dir>/pods/<namespace>_<name>_<uid>/<container>/<restartCount>.log
//
// holds each run's stdout and stderr, like /var/log/pods (see LogPath and
// PodFolderName); the rest of the pod's folder is the node's (layout.go).
//
// Allowed imports: anything (test/ is the room for harnesses); it is used
// by test/localcluster and the knit CLI, and must not import them.
package procnode
