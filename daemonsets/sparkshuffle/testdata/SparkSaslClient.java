// SparkSaslClient authenticates to a Spark shuffle service with the JDK's
// own DIGEST-MD5 SaslClient, configured as Spark's SparkSaslClient
// configures it (no authzid, protocol null, server name "default", qop
// auth, user base64("sparkSaslUser"), password base64 of the secret), over
// Spark's frames; then it asks for executor 1's local dirs. jdk_test.go
// compiles and runs it; it is not shipped.
//
// Usage: java SparkSaslClient <host> <port> <appId> <secret>
// Prints "COMPLETE", then "ANSWER <frame type>" or "FAIL <first line>".

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.HashMap;
import java.util.Map;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.CallbackHandler;
import javax.security.auth.callback.NameCallback;
import javax.security.auth.callback.PasswordCallback;
import javax.security.sasl.RealmCallback;
import javax.security.sasl.RealmChoiceCallback;
import javax.security.sasl.Sasl;
import javax.security.sasl.SaslClient;

public final class SparkSaslClient {
  static DataOutputStream out;
  static DataInputStream in;
  static long requestId = 1;

  public static void main(String[] args) throws Exception {
    String appId = args[2];
    String secret = args[3];
    try (Socket s = new Socket(args[0], Integer.parseInt(args[1]))) {
      out = new DataOutputStream(s.getOutputStream());
      in = new DataInputStream(s.getInputStream());
      Map<String, String> props = new HashMap<>();
      props.put(Sasl.QOP, "auth");
      props.put(Sasl.SERVER_AUTH, "true");
      CallbackHandler handler = callbacks -> {
        for (Callback cb : callbacks) {
          if (cb instanceof NameCallback) {
            ((NameCallback) cb).setName(b64("sparkSaslUser".getBytes(StandardCharsets.UTF_8)));
          } else if (cb instanceof PasswordCallback) {
            ((PasswordCallback) cb).setPassword(b64(secret.getBytes(StandardCharsets.UTF_8)).toCharArray());
          } else if (cb instanceof RealmCallback) {
            RealmCallback rc = (RealmCallback) cb;
            rc.setText(rc.getDefaultText());
          } else if (cb instanceof RealmChoiceCallback) {
            // Spark ignores it too.
          }
        }
      };
      SaslClient client = Sasl.createSaslClient(new String[] {"DIGEST-MD5"}, null, null, "default", props, handler);
      byte[] token = new byte[0];
      while (!client.isComplete()) {
        byte[] answer = rpc(saslMessage(appId, token));
        if (answer == null) {
          return;
        }
        token = client.evaluateChallenge(answer);
        if (client.isComplete()) {
          break;
        }
      }
      System.out.println("COMPLETE");
      byte[] app = appId.getBytes(StandardCharsets.UTF_8);
      ByteBuffer msg = ByteBuffer.allocate(1 + 4 + app.length + 4 + 4 + 1);
      msg.put((byte) 10).putInt(app.length).put(app).putInt(1).putInt(1).put((byte) '1');
      if (rpc(msg.array()) != null) {
        System.out.println("ANSWER 4");
      }
    }
  }

  static String b64(byte[] b) {
    return Base64.getEncoder().encodeToString(b);
  }

  static byte[] saslMessage(String appId, byte[] token) {
    byte[] app = appId.getBytes(StandardCharsets.UTF_8);
    ByteBuffer b = ByteBuffer.allocate(1 + 4 + app.length + 4 + token.length);
    b.put((byte) 0xEA).putInt(app.length).put(app).putInt(token.length).put(token);
    return b.array();
  }

  // rpc sends an RpcRequest; returns the RpcResponse body, or prints the
  // RpcFailure and returns null.
  static byte[] rpc(byte[] body) throws Exception {
    out.writeLong(8 + 1 + 8 + 4 + body.length);
    out.writeByte(3);
    out.writeLong(requestId++);
    out.writeInt(body.length);
    out.write(body);
    out.flush();
    long len = in.readLong();
    byte type = in.readByte();
    in.readLong();
    byte[] rest = new byte[(int) len - 17];
    in.readFully(rest);
    ByteBuffer b = ByteBuffer.wrap(rest);
    int n = b.getInt();
    byte[] payload = new byte[n];
    b.get(payload);
    if (type == 5) {
      System.out.println("FAIL " + new String(payload, StandardCharsets.UTF_8).split("\n")[0]);
      return null;
    }
    return payload;
  }
}
