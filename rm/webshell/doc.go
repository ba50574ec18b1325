// Package webshell is the RM's web shell: a terminal into a running YARN
// container, opened from the RM web port at /shell/<container id> (an HTML
// page with xterm.js) or by `knit shell`, both speaking the WebSocket of
// protocols/webshell at /shell/<container id>/ws.
//
// The RM serves it, not knit-node: the RM already decides every ACL, sees
// every container's pod, and its web address is the one users reach; the
// shell itself runs through the Kubernetes API (pods/exec), so no node
// port needs opening to users and one audit trail holds every session.
//
// # Who may open a shell
//
// The caller is whoever the web pages take as caller (Config.Caller: the
// user.name of Hadoop's pseudo authentication today); an anonymous caller
// gets no shell. Settings.Policy decides from the application's ACLs as
// the RM answers them (Apps): MODIFY_APP (default), or only the owner, or
// VIEW_APP, and in every case a user on yarn.admin.acl. Then:
//
//   - the Origin of a browser's handshake must be one of Settings.Origins
//     (the RM's web address): a page elsewhere cannot open a shell with
//     the user's cookies or name;
//   - the container must be running, and its pod must be a Knit container
//     pod: its knit.io/container and knit.io/application labels name the
//     container and its application, and knit.io/role is am or task. No
//     other pod is ever exec'd into;
//   - at most Settings.MaxPerUser sessions per user and
//     Settings.MaxPerContainer per container are open at once.
//
// A refusal is the handshake's HTTP answer with a plain-text reason (the
// page renders it). A session ends when its command exits, when the
// client goes, when the container ends, when the user's access is gone
// (both checked every Settings.Recheck), after Settings.IdleTimeout
// without a byte either way, and when the Server closes.
//
// # The shell
//
// Executor runs the command in the pod's container (ExecCommand: the
// container's work folder and its environment as knit-launcher exported
// them, then the user's command or an interactive login shell); Exec is
// client-go's remotecommand over pods/exec, WebSocket with SPDY fallback.
//
// # Audit
//
// Every session is logged (slog: user, container, pod, start, end, bytes
// in and out, exit, why it ended) and recorded as two Kubernetes Events on
// the pod, ShellOpened and ShellClosed.
//
// Imports: the standard library, echo, coder/websocket, client-go,
// apimachinery, protocols/webshell, protocols/yarnid, rks/launch (the pod
// labels), hadoopconf (Settings). No globals.
package webshell
