//! The hand-off: a client gives the host the agent's output (its own stdout) over the socket
//! (`SCM_RIGHTS`), so the host writes the session's lines to the agent itself, a process hop
//! fewer per answer than through the client. The client still reads the agent's requests and
//! passes them on, so it knows which are in flight; the host tells it, on the socket, the id of
//! each answer it wrote ([`Noting`]), and when the host dies, the client answers the rest.

use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};
use rmcp::RoleServer;
use rmcp::model::JsonRpcMessage;
use rmcp::service::TxJsonRpcMessage;
use rmcp::transport::Transport;
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncWrite, AsyncWriteExt, Interest};
use tokio::net::UnixStream;

/// The byte the descriptor rides on.
const CARRIER: u8 = b'F';

/// This process's stdout, to hand over: a description of its own when it is a pipe (reopened
/// through `/proc/self/fd`, so the nonblocking mode the host needs stays off the process's
/// stdout), a duplicate when it is a socket (the host sends to it without blocking, and
/// leaves its mode alone). `None` when it is neither (a file, a terminal): the client then
/// passes the host's lines itself. Elsewhere than on Linux, always `None`.
#[cfg(target_os = "linux")]
pub(crate) fn agent_output() -> Option<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let stdout = std::io::stdout();
    let fd = stdout.as_fd();
    let kind = nix::sys::stat::fstat(fd).ok()?.st_mode & libc::S_IFMT;
    if kind == libc::S_IFIFO {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .ok()?;
        return Some(file.into());
    }
    if kind == libc::S_IFSOCK {
        return fd.try_clone_to_owned().ok();
    }
    None
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn agent_output() -> Option<OwnedFd> {
    None
}

/// Send `fd` to the host on `stream`, on one byte.
pub(crate) async fn send_fd(stream: &UnixStream, fd: &OwnedFd) -> std::io::Result<()> {
    let fds = [fd.as_raw_fd()];
    loop {
        stream.writable().await?;
        let sent = stream.try_io(Interest::WRITABLE, || {
            sendmsg::<()>(
                stream.as_raw_fd(),
                &[IoSlice::new(&[CARRIER])],
                &[ControlMessage::ScmRights(&fds)],
                MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
                None,
            )
            .map_err(std::io::Error::from)
        });
        match sent {
            Ok(1) => return Ok(()),
            Ok(_) => return Err(std::io::ErrorKind::WriteZero.into()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
}

/// The most descriptors one message can carry (Linux's `SCM_MAX_FD`).
const SCM_MAX_FD: usize = 253;

/// Descriptors arrive close-on-exec, set as they are installed.
#[cfg(target_os = "linux")]
const RECEIVE_FLAGS: MsgFlags = MsgFlags::MSG_CMSG_CLOEXEC.union(MsgFlags::MSG_DONTWAIT);
/// No client hands its output over elsewhere ([`agent_output`]), and a descriptor that comes
/// anyway is refused ([`Handed::new`]) and closed.
#[cfg(not(target_os = "linux"))]
const RECEIVE_FLAGS: MsgFlags = MsgFlags::MSG_DONTWAIT;

/// The descriptor a client sent on `stream`: exactly one, on the carrier byte. It arrives
/// close-on-exec, so no server the host starts inherits the agent's output.
pub(crate) async fn receive_fd(stream: &UnixStream) -> std::io::Result<OwnedFd> {
    let invalid = |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_string());
    loop {
        stream.readable().await?;
        let got = stream.try_io(Interest::READABLE, || {
            let mut byte = [0u8; 1];
            let mut iov = [IoSliceMut::new(&mut byte)];
            // Room for as many as one message can carry (the kernel's SCM_MAX_FD), so none
            // is cut off: a cut-off message's descriptors are installed, yet cannot be read
            // from it (nix refuses to walk it), and would stay open in the host for good.
            let mut space = nix::cmsg_space!([RawFd; SCM_MAX_FD]);
            let msg = recvmsg::<()>(
                stream.as_raw_fd(),
                &mut iov,
                Some(&mut space),
                RECEIVE_FLAGS,
            )
            .map_err(std::io::Error::from)?;
            let mut fds = Vec::new();
            for cmsg in msg.cmsgs().map_err(std::io::Error::from)? {
                if let ControlMessageOwned::ScmRights(raw) = cmsg {
                    // SAFETY: each descriptor was just installed in this process for this
                    // message and is owned by nothing else.
                    fds.extend(raw.into_iter().map(|r| unsafe { OwnedFd::from_raw_fd(r) }));
                }
            }
            Ok((msg.bytes, fds))
        });
        match got {
            Ok((0, _)) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok((1, mut fds)) if fds.len() == 1 => return Ok(fds.remove(0)),
            Ok((_, fds)) => {
                return Err(invalid(&format!(
                    "expected one descriptor on one byte, got {}",
                    fds.len()
                )));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
}

/// The agent's output as the host writes it: a pipe (made nonblocking) or a socket (sent to
/// without blocking), driven by the host's reactor.
pub(crate) struct Handed {
    fd: AsyncFd<OwnedFd>,
    socket: bool,
}

impl Handed {
    /// Take `fd` as the agent's output: a pipe or a socket open for writing, nothing else.
    pub(crate) fn new(fd: OwnedFd) -> std::io::Result<Handed> {
        use nix::fcntl::{FcntlArg, OFlag, fcntl};
        #[cfg(not(target_os = "linux"))]
        return Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "the hand-off is taken on Linux only",
        ));
        let invalid =
            |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_string());
        let kind = nix::sys::stat::fstat(&fd)?.st_mode & libc::S_IFMT;
        let socket = match kind {
            libc::S_IFSOCK => true,
            libc::S_IFIFO => false,
            _ => return Err(invalid("the handed-over output is not a pipe or a socket")),
        };
        if !socket {
            let flags = OFlag::from_bits_truncate(fcntl(&fd, FcntlArg::F_GETFL)?);
            if flags & OFlag::O_ACCMODE == OFlag::O_RDONLY {
                return Err(invalid("the handed-over pipe is not open for writing"));
            }
            yep_host::rpc::set_nonblocking(&fd)?;
        }
        // SAFETY: an OwnedFd keeps its descriptor, open on the same description, until it is
        // dropped with the AsyncFd.
        let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::WRITABLE) }
            .map_err(|e| e.into_parts().1)?;
        Ok(Handed { fd, socket })
    }

    fn write_some(&self, buf: &[u8]) -> std::io::Result<usize> {
        let fd = self.fd.get_ref();
        let written = match self.socket {
            true => nix::sys::socket::send(
                fd.as_raw_fd(),
                buf,
                MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
            ),
            false => nix::unistd::write(fd, buf),
        };
        written.map_err(std::io::Error::from)
    }
}

impl AsyncWrite for Handed {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        loop {
            let mut guard = ready!(self.fd.poll_write_ready(cx))?;
            match guard.try_io(|_| self.write_some(buf)) {
                Ok(result) => return Poll::Ready(result),
                Err(_would_block) => continue,
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// A session's transport that, after each answer it wrote to the agent, writes the answer's
/// id (as JSON, one per line) to `notes`: the client's socket.
pub(crate) struct Noting<T, N> {
    pub(crate) inner: T,
    pub(crate) notes: Arc<tokio::sync::Mutex<N>>,
}

impl<T, N> Transport<RoleServer> for Noting<T, N>
where
    T: Transport<RoleServer, Error = std::io::Error>,
    N: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let id = match &item {
            JsonRpcMessage::Response(r) => Some(r.id.clone()),
            JsonRpcMessage::Error(e) => e.id.clone(),
            _ => None,
        };
        let sent = self.inner.send(item);
        let notes = Arc::clone(&self.notes);
        async move {
            sent.await?;
            if let Some(id) = id {
                let mut line = serde_json::to_vec(&id).map_err(std::io::Error::other)?;
                line.push(b'\n');
                // The client gone is the session ending: its reader sees it.
                let _ = notes.lock().await.write_all(&line).await;
            }
            Ok(())
        }
    }

    fn receive(
        &mut self,
    ) -> impl Future<Output = Option<rmcp::service::RxJsonRpcMessage<RoleServer>>> + Send {
        self.inner.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// A pipe's two ends.
    fn pipe() -> (OwnedFd, OwnedFd) {
        let (read, write) = nix::unistd::pipe().unwrap();
        (read, write)
    }

    #[tokio::test]
    async fn a_handed_pipe_is_written_to_and_closes_with_its_last_holder() {
        let (client, host) = UnixStream::pair().unwrap();
        let (read, write) = pipe();
        send_fd(&client, &write).await.unwrap();
        drop(write);
        let got = receive_fd(&host).await.unwrap();
        // Close-on-exec, so no server the host starts inherits it.
        let flags = nix::fcntl::fcntl(&got, nix::fcntl::FcntlArg::F_GETFD).unwrap();
        assert_ne!(flags & libc::FD_CLOEXEC, 0);
        let mut output = Handed::new(got).unwrap();
        output.write_all(b"{\"id\":1}\n").await.unwrap();
        drop(output);
        let mut agent = tokio::fs::File::from_std(std::fs::File::from(read));
        let mut seen = String::new();
        agent.read_to_string(&mut seen).await.unwrap();
        assert_eq!(seen, "{\"id\":1}\n");
    }

    #[tokio::test]
    async fn a_handed_socket_is_sent_to() {
        let (client, host) = UnixStream::pair().unwrap();
        let (agent, mine) = std::os::unix::net::UnixStream::pair().unwrap();
        send_fd(&client, &OwnedFd::from(mine)).await.unwrap();
        let mut output = Handed::new(receive_fd(&host).await.unwrap()).unwrap();
        assert!(output.socket);
        output.write_all(b"line\n").await.unwrap();
        drop(output);
        let mut seen = String::new();
        std::io::Read::read_to_string(&mut &agent, &mut seen).unwrap();
        assert_eq!(seen, "line\n");
    }

    #[tokio::test]
    async fn what_is_not_one_writable_pipe_or_socket_is_refused() {
        let invalid = |r: std::io::Result<Handed>| match r {
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::InvalidData, "{e}"),
            Ok(_) => panic!("taken"),
        };
        // A file, and a pipe's read end.
        let file = tempfile::tempfile().unwrap();
        invalid(Handed::new(file.into()));
        let (read, _write) = pipe();
        invalid(Handed::new(read));
        // A byte with no descriptor, and two descriptors on one byte.
        let (client, host) = UnixStream::pair().unwrap();
        client.try_write(b"F").unwrap();
        let e = receive_fd(&host).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData, "{e}");
        let (client, host) = UnixStream::pair().unwrap();
        let (a, b) = pipe();
        let fds = [a.as_raw_fd(), b.as_raw_fd()];
        sendmsg::<()>(
            client.as_raw_fd(),
            &[IoSlice::new(b"F")],
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::empty(),
            None,
        )
        .unwrap();
        let e = receive_fd(&host).await.unwrap_err();
        assert!(e.to_string().contains("got 2"), "{e}");
        // A client that closes before it hands anything over.
        let (client, host) = UnixStream::pair().unwrap();
        drop(client);
        let e = receive_fd(&host).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
    }
}
