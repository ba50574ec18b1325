// Package apps holds YARN's application, attempt and container records and
// their state machines, as a client of the ResourceManager can observe them:
// RMAppImpl, RMAppAttemptImpl and RMContainerImpl, rebuilt as a pure core in
// the style of etcd raft.
//
// Imports: the standard library, protobuf and protocols/yarnpb. Nothing here
// does I/O, reads a clock, or starts a goroutine; time comes in with every
// event.
//
// # Contract
//
// An Application is driven by one method:
//
//	effects, err := app.Handle(event, now)
//
// Events are what happened (a client submitted, a record was stored, the AM
// registered, a pod ended); effects are what the caller must now do (store a
// record, ask for the AM pod, start the AM, stop a container, hand the AM a
// completed-container status). The caller carries effects out in order and,
// for effects with a Done event, feeds that event back once the work has
// succeeded, retrying until it does. Persist effects come first: an
// application is never reported in a state its stored record would not bring
// back after a restart. An event the state does not take returns
// *InvalidTransitionError and changes nothing. One application is not safe
// for concurrent use; the caller serialises its events.
//
// Attempt and container events go through the same Handle: the application
// routes them, and what an attempt tells its application (registered, failed,
// finished...) is handled in the same call, so every call leaves the three
// machines consistent. Recovery is the normal path: NewApplication from the
// stored submission, then Handle(Recover{...}), then ContainerRecovered for
// each pod found.
//
// Reports (Application.Report, Attempt.Report, Container.Report) fill
// ApplicationReportProto, ApplicationAttemptReportProto and
// ContainerReportProto as a Hadoop 3.4 RM does; Filter selects applications
// for getApplications. An application report asked to be kept
// (ReportOptions.Keep) is kept until the next Handle, the only way an
// application changes, apart from what moves with the clock; reports share
// every message below their top level, so a caller changes only that.
//
// # Application states
//
// Clients see FINAL_SAVING and KILLING as the state before them, and
// FINISHING as FINISHED. Kill is taken in every state (ignored once the
// application is ending).
//
//	NEW ──Start──▶ NEW_SAVING ──AppSaved──▶ SUBMITTED ──Accepted──▶ ACCEPTED ──AM registered──▶ RUNNING
//	 │                  │                       │                   ▲   │                          │
//	 │Kill              │Kill, Rejected         │Kill, Rejected     │   │AM failed,                │AM failed,
//	 ▼                  │                       │                   │   │attempts remain:          │attempts remain:
//	KILLED              │                       │                   └───┘new attempt               │new attempt ──▶ ACCEPTED
//	                    ▼                       ▼                                                  │
//	                FINAL_SAVING ◀──────────────┴── Kill (via KILLING), AM failed for the last time,┘
//	                    │                           AM unregistered
//	                    │AppFinalSaved
//	                    ├──▶ FAILED | KILLED | FINISHED
//	                    └──▶ FINISHING ──AM container ended (or AM finishing timer)──▶ FINISHED
//
// # Attempt states
//
//	NEW ─▶ SUBMITTED ──AttemptAdded──▶ SCHEDULED ──AMContainerAllocated──▶ ALLOCATED_SAVING
//	           │ (unmanaged AM)                                                  │AttemptSaved
//	           ▼                                                                 ▼
//	LAUNCHED_UNMANAGED_SAVING ──AttemptSaved──▶ LAUNCHED ◀──AttemptLaunched── ALLOCATED
//	                                               │AttemptRegistered (from ALLOCATED too)
//	                                               ▼
//	                                            RUNNING ──AttemptUnregistered──┐
//	                                                                           ▼
//	AM container ended, AttemptExpired, AttemptFailed, Kill ──────────▶ FINAL_SAVING
//	(from the states above)                                                    │AttemptFinalSaved
//	                                                                           ▼
//	                FINISHING ──AM container ended──▶ FINISHED    |    FAILED    |    KILLED
//
// # Container states
//
// Clients see RUNNING until a container has completed, then COMPLETE.
//
//	NEW ──▶ RESERVED ──▶ ALLOCATED ──acquired by the AM──▶ ACQUIRED ──launched──▶ RUNNING
//	                         │                                 │                      │
//	                         └─expired, killed                 └─finished, released,  └─finished, released, killed
//	                                                             expired, killed
//	         ▼ ends in: COMPLETED (process ended), EXPIRED, RELEASED or KILLED
package apps
