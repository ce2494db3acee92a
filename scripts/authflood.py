# Memory before authentication: N parallel 5 MiB request bodies against a
# server started with --credentials, unsigned ("unsigned") or signed by a
# known access key with a wrong signature ("forged"; the key AKALICE must be
# in the credentials file). Prints the answers; read the server's peak RSS
# (VmHWM in /proc/PID/status) before and after. Usage:
#   python3 scripts/authflood.py PORT unsigned|forged [N]
import socket, threading, sys, time, datetime
port=int(sys.argv[1]); mode=sys.argv[2]; n=int(sys.argv[3]) if len(sys.argv)>3 else 32
body=b'{"x":[' + b'0,'*(5*1024*1024//2-8) + b'0]}'
body=body[:5*1024*1024-2]+b']}'
def one():
    s=socket.create_connection(("127.0.0.1",port))
    h="POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: AmazonSQS.SendMessage\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: %d\r\n"%len(body)
    if mode=="forged":
        now=datetime.datetime.utcnow()
        h+="X-Amz-Date: %s\r\nAuthorization: AWS4-HMAC-SHA256 Credential=AKALICE/%s/us-east-1/sqs/aws4_request, SignedHeaders=host;x-amz-date, Signature=%s\r\n"%(now.strftime("%Y%m%dT%H%M%SZ"),now.strftime("%Y%m%d"),"0"*64)
    s.sendall((h+"\r\n").encode())
    try: s.sendall(body)
    except Exception as e: pass
    r=s.recv(200); s.close()
    res.append(r.split(b"\r\n")[0])
res=[]
ts=[threading.Thread(target=one) for _ in range(n)]
[t.start() for t in ts]; [t.join() for t in ts]
from collections import Counter; print(Counter(res))
