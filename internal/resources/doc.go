// Package resources runs the resources of Managed Agents sessions: the
// files, repositories and memory stores the SDK's `resources` field and
// /v1/sessions/{id}/resources attach to a session, and the session's
// outputs.
//
// The sandbox view of a session (the layout other layers follow):
//
//   - /mnt is a READ-ONLY bind of a daemon-owned host tree
//     (<home>/resources/<session>/mnt). The daemon writes there with plain
//     file calls; the sandbox cannot. File resources live at their
//     mount_path when it is under /mnt (default /mnt/session/uploads/<file_id>),
//     else at /mnt/.links/<resource id> with a symlink at mount_path made
//     through the guest. read_only memory stores are at /mnt/memory/<name>/.
//   - READ-WRITE binds of their own host dirs: /mnt/session/outputs/
//     (always) and each read_write memory store /mnt/memory/<name>/. A host
//     dir the sandbox can write is hostile: the daemon reads it only
//     through internal/beneath.
//   - github_repository: cloned by the daemon into a directory of its own
//     (the sandbox never sees it, so git never runs where the sandbox can
//     write), the token given to git only through its environment
//     (GIT_CONFIG_* — not in a file, not on a command line other users can
//     read), then copied into the sandbox through the guest (default
//     /workspace/<repo-name>).
//
// A read_write store's changes become memory versions at turn end
// (ContextHook.TurnEnd) and before its sandbox hibernates or is destroyed
// (sandbox.Hooks.BeforeStop); the version each file was made from is kept
// in the session's state.json, beside the tree, so a restarted daemon
// syncs on the right base and never copies the store over unsynced work.
//
// Mounts are fixed when a sandbox starts. What a sandbox shows is derived
// from durable state (the store, the files and memory services) at every
// Prepare, so a host tree lost with its disk is made again.
package resources
