#pragma once
// The task-submit client (see task_submit.cpp), as a function so the small `pto-task-submit` binary and
// nothing else links it: a process per batch of test cases must start fast.
namespace pto {

int run_task_submit(int argc, char** argv);

}  // namespace pto
