"""The worker `erasure server start` and `erasure serve` start: what a run executes is fixed by the
installed code, never by the server's records (issue 34).

Prefect's process worker runs whatever the server says: the pool's `job_configuration.command`, the
deployment's `pull:` steps (`run_shell_script` among them) and its `job_variables` (environment, working
folder). Anyone holding the API credential can PATCH those, and the next run of any deployment would
execute their command as the worker's OS user. This worker reads none of them. For a flow run it takes
only the deployment's name, looks it up in prefect.yaml as it was when the worker started (the pinned
definitions: name -> entrypoint), imports that flow from the installed code, and runs the flow object in
a child process (Prefect's own `DirectSubprocessStarter`, what `flow.serve` uses): the child inherits the
worker's environment and working folder, and loads nothing from the server but the run's parameters.
A run of a deployment prefect.yaml does not name crashes without running anything.

`python -m cli.prefect_worker --pool erasure-local` (the module's name has `prefect` in it: the state
file's liveness check looks for it).
"""

from __future__ import annotations

import argparse
import asyncio
import copyreg
import importlib
import warnings
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import yaml
from prefect.client.schemas.objects import FlowRun
from prefect.flows import Flow
from prefect.runner._flow_run_executor import FlowRunExecutionResult, FlowRunExecutorContext
from prefect.runner._process_manager import ProcessHandle
from prefect.runner._starter_direct import DirectSubprocessStarter
from prefect.workers.process import ProcessJobConfiguration, ProcessWorker, ProcessWorkerResult

from erasure.config import PROJECT_ROOT


def pinned_entrypoints(project_dir: Path = PROJECT_ROOT) -> dict[str, str]:
    """prefect.yaml's deployments, read once: deployment name -> `module:function` entrypoint."""
    doc = yaml.safe_load((project_dir / "prefect.yaml").read_text())
    return {str(d["name"]): str(d["entrypoint"]) for d in doc["deployments"]}


_LOADED: dict[int, str] = {}
"""id of each flow object `load_flow` returned -> its entrypoint (how it is pickled for the child)."""


def load_flow(entrypoint: str) -> Flow[..., Any]:
    """The flow object at a pinned `module:function` entrypoint, from the installed code."""
    module, _, attr = entrypoint.partition(":")
    flow = getattr(importlib.import_module(module), attr)
    if not isinstance(flow, Flow):
        raise TypeError(f"{entrypoint} is not a flow")
    _LOADED[id(flow)] = entrypoint
    return flow


def _reduce_flow(flow: Flow[..., Any]) -> Any:
    """Pickle a pinned flow as "import it again from its entrypoint": by value, cloudpickle would copy
    its function without the module's globals (a string annotation then names nothing in the child)."""
    entrypoint = _LOADED.get(id(flow))
    if entrypoint is None:
        return object.__reduce_ex__(flow, 4)
    return load_flow, (entrypoint,)


copyreg.pickle(Flow, _reduce_flow)


with warnings.catch_warnings():  # Prefect's registry warns that this class takes the "process" type over
    warnings.simplefilter("ignore", UserWarning)

    class PinnedWorker(ProcessWorker):
        """A process worker that runs only prefect.yaml's flows, from the installed code (module docstring)."""

        def __init__(self, *args: Any, entrypoints: dict[str, str], **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._entrypoints = dict(entrypoints)

        async def _pinned_flow(self, flow_run: FlowRun) -> tuple[str, Flow[..., Any]]:
            if flow_run.deployment_id is None:
                raise RuntimeError("this worker runs deployments only")
            deployment = await self.client.read_deployment(flow_run.deployment_id)
            entrypoint = self._entrypoints.get(deployment.name)
            if entrypoint is None:
                raise RuntimeError(f"the deployment {deployment.name!r} is not one of prefect.yaml's: not run")
            return deployment.name, load_flow(entrypoint)

        async def run(
            self,
            flow_run: FlowRun,
            configuration: ProcessJobConfiguration,  # the server's: not used (command, env, working_dir)
            task_status: anyio.abc.TaskStatus[int] | None = None,
        ) -> ProcessWorkerResult:
            """Run the pinned flow of the run's deployment in a child process; its exit status."""
            status = task_status if task_status is not None else anyio.TASK_STATUS_IGNORED
            name, flow = await self._pinned_flow(flow_run)

            async def resolve(_: FlowRun) -> Flow[..., Any]:
                return flow

            execution: FlowRunExecutionResult | None = None
            async with FlowRunExecutorContext() as ctx:
                starter = DirectSubprocessStarter(flow=flow, deployment_name=name, control_channel=ctx.control_channel)
                executor = ctx.create_executor(flow_run, starter, resolve_flow=resolve, propose_submitting=False)

                async def execute(
                    *, task_status: anyio.abc.TaskStatus[ProcessHandle] = anyio.TASK_STATUS_IGNORED
                ) -> None:
                    nonlocal execution
                    execution = await executor.submit(task_status=task_status)

                async with anyio.create_task_group() as tg:
                    handle = await tg.start(execute)
                    if handle.pid is None:
                        raise RuntimeError("the flow run's process has no pid")
                    status.started(handle.pid)
            if execution is None or execution.status_code is None:
                raise RuntimeError("the flow run's process did not start")
            return ProcessWorkerResult(status_code=execution.status_code, identifier=str(execution.handle.pid))


async def _serve(pool: str, entrypoints: dict[str, str]) -> None:
    async with PinnedWorker(work_pool_name=pool, entrypoints=entrypoints) as worker:
        await worker.start()


def main(argv: list[str] | None = None) -> int:
    """`python -m cli.prefect_worker --pool NAME [--project-dir DIR]`: poll the pool until stopped."""
    p = argparse.ArgumentParser(prog="python -m cli.prefect_worker", description=__doc__.splitlines()[0])
    p.add_argument("--pool", required=True)
    p.add_argument("--project-dir", type=Path, default=PROJECT_ROOT, help="where prefect.yaml is")
    args = p.parse_args(argv)
    asyncio.run(_serve(args.pool, pinned_entrypoints(args.project_dir)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
