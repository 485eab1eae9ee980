package session

// Failpoints: the points of a turn (and of the background task poller)
// where crash tests (builds with the failpoints tag) hang the daemon to
// SIGKILL it there.
const (
	// FailAfterRunRow: the run row is inserted, nothing else of the turn
	// is written yet.
	FailAfterRunRow = "after-run-row"
	// FailBeforeModelRequest: the model request is journalled (op_started)
	// and its span started; the request is not sent yet.
	FailBeforeModelRequest = "before-model-request"
	// FailMidModelStream: a text block of the response was delivered as an
	// agent.message and kept as a stream chunk; the rest has not streamed.
	FailMidModelStream = "mid-model-stream"
	// FailMidModelBlock: the text of the block the response is streaming
	// was saved (a batch of deltas); the block has not completed.
	FailMidModelBlock = "mid-model-block"
	// FailAfterToolUse: a built-in tool use's agent.tool_use is stored,
	// and its op_started with it in one transaction; the guest has not
	// been asked to run it and the step's response has not ended.
	FailAfterToolUse = "after-tool-use"
	// FailBeforeToolExec: the tool call is journalled (op_started); the
	// guest has not been asked to run it.
	FailBeforeToolExec = "before-tool-exec"
	// FailAfterToolExec: the guest ran the tool call and recorded its
	// result; neither op_completed nor agent.tool_result is written.
	FailAfterToolExec = "after-tool-exec"
	// FailAfterToolResult: a built-in tool call's agent.tool_result is
	// stored, and its op_completed with it in one transaction; nothing
	// after it (the next model request) is.
	FailAfterToolResult = "after-tool-result"
	// FailBeforeMCPCall: the MCP call is journalled (op_started); the
	// request is not sent yet.
	FailBeforeMCPCall = "before-mcp-call"
	// FailAfterBackgroundReport: a background task's end is reported to the
	// model (its user.message is stored); the task is not marked finished.
	FailAfterBackgroundReport = "after-background-report"
	// FailMidCompaction: a compaction's summary request is journalled
	// (op_started); it is not sent yet and no compaction event exists.
	FailMidCompaction = "mid-compaction"
	// FailMidEvaluation: an outcome evaluation began (its start and first
	// ongoing span are stored, the grader's request is journalled); the
	// grader has not been asked.
	FailMidEvaluation = "mid-evaluation"
	// FailAfterThreadOpen: a coordinator's create_thread call is journalled
	// and the thread's session (with its task) is stored; neither the
	// parent's session.thread_created nor the call's result is written.
	FailAfterThreadOpen = "after-thread-open"
	// FailAfterClaim: the orphan sweep claimed a batch of orphaned run
	// rows (ClaimRunRows committed); none of their turns is handed to a
	// worker yet.
	FailAfterClaim = "after-claim"
)

// Failpoints lists every failpoint, for the crash-test hook.
var Failpoints = []string{FailAfterRunRow, FailBeforeModelRequest, FailMidModelStream, FailMidModelBlock, FailAfterToolUse, FailBeforeToolExec, FailAfterToolExec, FailAfterToolResult, FailBeforeMCPCall, FailAfterBackgroundReport, FailMidCompaction, FailMidEvaluation, FailAfterThreadOpen, FailAfterClaim}
