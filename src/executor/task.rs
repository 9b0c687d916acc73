//! Join handles and join errors.

use super::backend::VulkanBackend;
use super::local::{Local, Runner};
use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Repr {
    Cancelled,
    Panic(String),
    NotRunning,
}

/// Why a task did not produce its output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", match &self.repr {
    Repr::Cancelled => "task was cancelled".to_string(),
    Repr::Panic(m) => format!("task panicked: {m}"),
    Repr::NotRunning => "the task's executor is not running, so the task cannot finish: \
        await its JoinHandle inside a task of that executor, or call join()".to_string(),
})]
pub struct JoinError {
    repr: Repr,
}

impl JoinError {
    pub(crate) fn cancelled() -> Self {
        JoinError { repr: Repr::Cancelled }
    }

    pub(crate) fn panicked(payload: Box<dyn Any + Send>) -> Self {
        let msg = if let Some(s) = payload.downcast_ref::<&str>() {
            s.to_string()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "(non-string panic payload)".to_string()
        };
        JoinError { repr: Repr::Panic(msg) }
    }

    /// A [`JoinHandle`] was awaited outside its executor while that executor was not running,
    /// so the task could never have finished there (the task itself goes on; call
    /// [`JoinHandle::join`] or await the handle inside a task of its executor).
    pub fn is_not_running(&self) -> bool {
        self.repr == Repr::NotRunning
    }

    /// The task was aborted, or the executor was dropped before it finished.
    pub fn is_cancelled(&self) -> bool {
        self.repr == Repr::Cancelled
    }

    /// The task panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self.repr, Repr::Panic(_))
    }

    /// The panic message, if the task panicked with a string.
    pub fn panic_message(&self) -> Option<&str> {
        match &self.repr {
            Repr::Panic(m) => Some(m),
            Repr::Cancelled | Repr::NotRunning => None,
        }
    }
}

/// A handle to a spawned task: a future of its output, and a blocking [`JoinHandle::join`].
///
/// Dropping the handle detaches the task: it keeps running. [`JoinHandle::abort`] cancels it at
/// its next await; GPU work it already submitted still completes and its resources are released
/// after that.
#[must_use = "dropping a JoinHandle detaches the task; await it, join() it, or drop it on purpose"]
pub struct JoinHandle<T> {
    task: Option<async_task::FallibleTask<Result<T, JoinError>, super::local::Aborted>>,
    /// The task's slot in its executor's list of unfinished tasks.
    id: usize,
    runner: Rc<dyn Runner>,
}

impl<T> std::fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinHandle").field("finished", &self.is_finished()).finish()
    }
}

impl<T> JoinHandle<T> {
    pub(crate) fn new(
        task: async_task::FallibleTask<Result<T, JoinError>, super::local::Aborted>,
        id: usize,
        runner: Rc<dyn Runner>,
    ) -> Self {
        JoinHandle { task: Some(task), id, runner }
    }

    /// Cancels the task at its next await point (or before it first runs).
    pub fn abort(&self) {
        // A finished task's slot may hold another task by now; an unfinished one's is its own.
        if !self.is_finished() {
            self.runner.abort(self.id);
        }
    }

    /// Whether the task has finished (completed, panicked or been cancelled).
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Runs the executor on this thread until the task finishes, and returns its output.
    /// Inside a task, `.await` the handle instead: a blocking join there would run the executor
    /// re-entrantly.
    pub fn join(mut self) -> Result<T, JoinError> {
        let runner = self.runner.clone();
        let task = self.task.take().expect("present until joined");
        // A finished task needs no loop (entering and leaving one takes the queue's lock twice
        // and may wake the driver).
        if !task.is_finished() {
            runner.run_until_dyn(&mut || task.is_finished());
        }
        // Finished (or the executor is gone): one poll gives the output without blocking.
        use futures::FutureExt;
        task.now_or_never().flatten().unwrap_or_else(|| Err(JoinError::cancelled()))
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let runner = self.runner.clone();
        let task = self.task.as_mut().expect("polled after completion");
        match Pin::new(task).poll(cx) {
            // Awaited where its executor does not run (another runtime, `block_on`): it would
            // never be woken. Say so instead of hanging.
            Poll::Pending if !runner.is_running() => Poll::Ready(Err(JoinError { repr: Repr::NotRunning })),
            Poll::Pending => Poll::Pending,
            Poll::Ready(out) => Poll::Ready(out.unwrap_or_else(|| Err(JoinError::cancelled()))),
        }
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.detach();
        }
    }
}

/// Spawns tasks on an [`crate::Executor`] from inside its tasks (made by
/// [`crate::Executor::spawner`]). Like the executor it is `!Send`.
#[derive(Clone)]
pub struct Spawner {
    local: Rc<Local<VulkanBackend>>,
}

impl std::fmt::Debug for Spawner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spawner").finish_non_exhaustive()
    }
}

impl Spawner {
    pub(crate) fn new(local: Rc<Local<VulkanBackend>>) -> Self {
        Spawner { local }
    }

    /// Spawns a task on the executor.
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        self.local.spawn(future)
    }
}
