// pto-task-submit: the `task-submit` drop-in as its own small binary (no libcurl, yaml-cpp or SQLite to load:
// it starts in ~2 ms instead of pto-runner's ~10 ms). Install it as `task-submit`; `pto-runner task-submit`
// runs it too.
#include "task_submit/task_submit.h"

int main(int argc, char** argv) { return pto::run_task_submit(argc, argv); }
